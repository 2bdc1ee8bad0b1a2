/* plugin.c: finds and loads plumb's plugins (plumb-cuda.so, plumb-mpi.so, plumb-nccl.so)
 * next to the running binary, on demand (see plugin.h). */
#include "exec/plugin.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Linked in by programs that carry a plugin's objects (tests/test_cuda.c); NULL elsewhere. */
extern const plugin_api *plumb_plugin_cuda(void) __attribute__((weak));
extern const plugin_api *plumb_plugin_mpi(void) __attribute__((weak));
extern const plugin_api *plumb_plugin_nccl(void) __attribute__((weak));

typedef struct plugin_kind {
    const char *name;
    const plugin_api *(*linked)(void);
    int built;          /* plumb-NAME.so was built with this binary */
    const char *why;    /* when not: what the build lacked */
    /* Open MPI opens its own components with dlopen and they resolve MPI's symbols through
     * the global scope, so the transports load with RTLD_GLOBAL (and with them libmpi) */
    int global;
} plugin_kind;

static const plugin_kind *kind_of(const char *name)
{
    static const plugin_kind kinds[] = {
#ifdef PLUMB_HAVE_CUDA
        {"cuda", plumb_plugin_cuda, 1, NULL, 0},
#else
        {"cuda", plumb_plugin_cuda, 0, "nvcc was not found at build time", 0},
#endif
#ifdef PLUMB_HAVE_MPI
        {"mpi", plumb_plugin_mpi, 1, NULL, 1},
#else
        {"mpi", plumb_plugin_mpi, 0,
         "MPI was not found at build time: apt-get install libopenmpi-dev and rebuild", 1},
#endif
#if defined(PLUMB_HAVE_CUDA) && defined(PLUMB_HAVE_NCCL) && defined(PLUMB_HAVE_MPI)
        {"nccl", plumb_plugin_nccl, 1, NULL, 1},
#else
        {"nccl", plumb_plugin_nccl, 0, "it needs CUDA, NCCL and MPI at build time", 1},
#endif
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(kinds[i].name, name)) return &kinds[i];
    return NULL;
}

/* The folder of the running binary into dir (n bytes). 0, or -1 when unknown. */
static int exe_dir(char *dir, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", dir, n - 1);
    if (len <= 0 || (size_t)len >= n - 1) return -1;
    dir[len] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash) return -1;
    if (slash == dir) slash[1] = '\0';
    else *slash = '\0';
    return 0;
}

/* A loaded table must come from this build of plumb. */
static const plugin_api *check(const plugin_api *api, const char *name, const char *opt,
                               const char *path, plumb_err *err)
{
    if (!api || api->abi != PLUGIN_ABI || api->api_size != sizeof(plugin_api) ||
        api->backend_size != sizeof(backend) || api->transport_size != sizeof(transport) ||
        !api->name || strcmp(api->name, name)) {
        err_set(err, NULL, opt, "%s belongs to another build of plumb (rebuild with make)",
                path);
        return NULL;
    }
    return api;
}

const plugin_api *plugin_load(const char *name, const char *opt, plumb_err *err)
{
    const plugin_kind *k = kind_of(name);
    if (!k) {
        err_set(err, NULL, opt, "no plugin named \"%s\"", name);
        return NULL;
    }
    if (k->linked) return check(k->linked(), name, opt, "the linked-in plugin", err);
    if (!k->built) {
        err_set(err, NULL, opt, "not built into this binary (%s)", k->why);
        return NULL;
    }
    char dir[4096], path[4200], sym[64];
    if (exe_dir(dir, sizeof dir)) {
        err_set(err, NULL, opt, "cannot find plumb-%s.so: the binary's folder is unknown "
                "(/proc/self/exe unreadable)", name);
        return NULL;
    }
    snprintf(path, sizeof path, "%s/plumb-%s.so", dir, name);
    if (access(path, F_OK) != 0) {
        err_set(err, NULL, opt, "plumb-%s.so not found next to the binary (in %s; copy it "
                "there from the build folder, or run make)", name, dir);
        return NULL;
    }
    dlerror();
    void *h = dlopen(path, RTLD_NOW | (k->global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (!h) {
        const char *why = dlerror();
        err_set(err, NULL, opt, "cannot load %s: %s", path, why ? why : "unknown reason");
        return NULL;
    }
    snprintf(sym, sizeof sym, "plumb_plugin_%s", name);
    const plugin_api *(*get)(void) = (const plugin_api *(*)(void))dlsym(h, sym);
    if (!get) {
        err_set(err, NULL, opt, "%s has no %s (not a plumb plugin?)", path, sym);
        return NULL; /* the handle stays open: what it loaded may be in use elsewhere */
    }
    return check(get(), name, opt, path, err);
}
