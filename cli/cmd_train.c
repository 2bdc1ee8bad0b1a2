/* cmd_train.c: `plumb train MODEL.json [PLAN.json]`: trains a model for real on the CPU or
 * CUDA backend, with progress lines and a final test accuracy. A plan supplies the
 * microbatching and optimizer; a one-stage plan (or none) trains sequentially. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/plan.h"
#include "exec/backend.h"
#include "exec/data.h"
#include "exec/model.h"
#include "exec/train.h"

static const char *const usage_text =
    "usage: plumb train MODEL.json [PLAN.json] [OPTIONS]\n"
    "\n"
    "Trains the model (a plumb-model/1 spec) for real and prints progress and a final test\n"
    "accuracy. With a plan, its microbatch size, microbatch count and optimizer are used.\n"
    "\n"
    "  --data KIND        fashion-mnist, synthetic or text (default: fashion-mnist for\n"
    "                     [1,28,28] inputs with 10 classes, text for token models,\n"
    "                     else synthetic)\n"
    "  --data-dir DIR     Fashion-MNIST folder (default " FMNIST_DIR ")\n"
    "  --text FILE        train a token model on FILE's bytes (default: generated text)\n"
    "  --samples N        synthetic/text training samples (default 8192; test: N/4)\n"
    "  --epochs N         passes over the training data (default 1)\n"
    "  --steps N          optimizer steps instead of epochs\n"
    "  --batch N          samples per minibatch (default 64, or the plan's)\n"
    "  --microbatches M   microbatches per minibatch, gradients accumulated (default 1)\n"
    "  --optimizer NAME   sgd, momentum or adam (default sgd, or the plan's)\n"
    "  --lr X             learning rate (default 0.05 sgd, 0.01 momentum, 0.001 adam)\n"
    "  --momentum X       momentum coefficient (default 0.9)\n"
    "  --weight-decay X   L2 weight decay (default 0)\n"
    "  --seed S           seed for the weights and the data order (default: the model's)\n"
    "  --backend NAME     cpu or cuda (default cpu)\n"
    "  --device N         device index for the backend (default 0)\n"
    "  --log-every N      steps between progress lines (default: about 20 lines)\n"
    "  --quiet            print only the final lines\n"
    "  --help             this text\n";

enum {
    O_DATA = 1000, O_DATADIR, O_TEXT, O_SAMPLES, O_EPOCHS, O_STEPS, O_BATCH, O_MICRO, O_OPT,
    O_LR, O_MOM, O_WD, O_SEED, O_BACKEND, O_DEVICE, O_LOG, O_QUIET, O_HELP
};

int cmd_train(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"data", required_argument, 0, O_DATA},       {"data-dir", required_argument, 0, O_DATADIR},
        {"text", required_argument, 0, O_TEXT},       {"samples", required_argument, 0, O_SAMPLES},
        {"epochs", required_argument, 0, O_EPOCHS},   {"steps", required_argument, 0, O_STEPS},
        {"batch", required_argument, 0, O_BATCH},     {"microbatches", required_argument, 0, O_MICRO},
        {"optimizer", required_argument, 0, O_OPT},   {"lr", required_argument, 0, O_LR},
        {"momentum", required_argument, 0, O_MOM},    {"weight-decay", required_argument, 0, O_WD},
        {"seed", required_argument, 0, O_SEED},       {"backend", required_argument, 0, O_BACKEND},
        {"device", required_argument, 0, O_DEVICE},   {"log-every", required_argument, 0, O_LOG},
        {"quiet", no_argument, 0, O_QUIET},           {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0}};
    const char *data = NULL, *datadir = NULL, *textfile = NULL, *bkname = "cpu", *optname = NULL;
    int samples = 8192, epochs = 1, steps = 0, batch = 0, micro = 0, device = 0, logevery = 0;
    int quiet = 0, have_seed = 0, seed = 0;
    double lr = -1, mom = -1, wd = 0;
    int c;
    optind = 1;
    while ((c = cli_getopt("train", argc, argv, "", longopts)) != -1) {
        switch (c) {
        case O_DATA: data = optarg; break;
        case O_DATADIR: datadir = optarg; break;
        case O_TEXT: textfile = optarg; break;
        case O_SAMPLES: if (cli_int("train", "--samples", optarg, 1, 1 << 24, &samples)) return 2; break;
        case O_EPOCHS: if (cli_int("train", "--epochs", optarg, 1, 100000, &epochs)) return 2; break;
        case O_STEPS: if (cli_int("train", "--steps", optarg, 1, 1 << 30, &steps)) return 2; break;
        case O_BATCH: if (cli_int("train", "--batch", optarg, 1, 1 << 20, &batch)) return 2; break;
        case O_MICRO: if (cli_int("train", "--microbatches", optarg, 1, 1 << 16, &micro)) return 2; break;
        case O_OPT: optname = optarg; break;
        case O_LR: if (cli_num("train", "--lr", optarg, 1, &lr)) return 2; break;
        case O_MOM: if (cli_num("train", "--momentum", optarg, 0, &mom)) return 2; break;
        case O_WD: if (cli_num("train", "--weight-decay", optarg, 0, &wd)) return 2; break;
        case O_SEED: if (cli_int("train", "--seed", optarg, 0, 2147483647, &seed)) return 2;
            have_seed = 1; break;
        case O_BACKEND: bkname = optarg; break;
        case O_DEVICE: if (cli_int("train", "--device", optarg, 0, 1023, &device)) return 2; break;
        case O_LOG: if (cli_int("train", "--log-every", optarg, 1, 1 << 30, &logevery)) return 2; break;
        case O_QUIET: quiet = 1; break;
        case O_HELP: fputs(usage_text, stdout); return 0;
        default: return 2;
        }
    }
    int npos = argc - optind;
    if (npos < 1 || npos > 2)
        return cli_fail("train", "expected MODEL.json and an optional PLAN.json (got %d file "
                        "arguments); see plumb train --help", npos);
    if (optname && optimizer_kind_parse(optname) < 0)
        return cli_fail("train", "--optimizer: expected sgd, momentum or adam (got \"%s\")",
                        optname);
    if (data && strcmp(data, "fashion-mnist") && strcmp(data, "synthetic") && strcmp(data, "text"))
        return cli_fail("train", "--data: expected fashion-mnist, synthetic or text (got \"%s\")",
                        data);

    plumb_err err = {{0}};
    int rc = 2;
    model *m = NULL;
    plan *pl = NULL;
    dataset *tr = NULL, *te = NULL;
    const backend *bk = backend_find(bkname, &err);
    if (!bk) { err_print(&err); return 2; }
    if (!(m = model_load(argv[optind], &err))) goto fail;
    if (have_seed) m->seed = (unsigned long long)seed;
    int okind = optname ? optimizer_kind_parse(optname) : OPT_SGD;
    int mbsize = 0, nmicro = micro ? micro : 1;
    if (npos == 2) {
        if (!(pl = plan_load(argv[optind + 1], &err))) goto fail;
        if (pl->prof->nlayers != m->nlayers) {
            err_set(&err, argv[optind + 1], "profile.layers",
                    "expected %d layers, one per top-level layer of %s (got %d)", m->nlayers,
                    argv[optind], pl->prof->nlayers);
            goto fail;
        }
        if (!optname) okind = (int)pl->optimizer;
        if (!micro) nmicro = pl->microbatches;
        mbsize = pl->microbatch_size;
        int replicated = 0;
        for (int s = 0; s < pl->nstages; s++) replicated |= pl->stages[s].replicas > 1;
        if (pl->nstages > 1 || replicated) {
            err_set(&err, argv[optind + 1], "stages",
                    "pipelined and replicated execution is not available in this build yet; "
                    "expected a plan with one unreplicated stage (got %d stages)", pl->nstages);
            rc = 1;
            goto fail;
        }
    }
    if (batch) {
        if (batch % nmicro) {
            rc = cli_fail("train", "--batch: expected a multiple of the %d microbatches (got %d)",
                          nmicro, batch);
            goto out;
        }
        mbsize = batch / nmicro;
    } else if (!mbsize) {
        mbsize = 64 / nmicro > 0 ? 64 / nmicro : 1;
    }
    if (!data)
        data = m->tokens ? "text"
               : (shape_numel(m->in_ndim, m->in_shape) == 784 && m->classes == 10)
                   ? "fashion-mnist"
                   : "synthetic";
    if (!strcmp(data, "fashion-mnist")) {
        if (!(tr = data_fashion_mnist(datadir, 1, &err)) ||
            !(te = data_fashion_mnist(datadir, 0, &err)))
            goto fail;
    } else if (!strcmp(data, "text")) {
        int ntest = samples / 4 > 0 ? samples / 4 : 1;
        if (!(tr = data_text(m, textfile, samples, m->seed, &err)) ||
            !(te = data_text(m, textfile, ntest, m->seed + 1000003, &err)))
            goto fail;
    } else {
        int ntest = samples / 4 > 0 ? samples / 4 : 1;
        if (!(tr = data_synthetic(m, samples, m->seed, &err)) ||
            !(te = data_synthetic(m, ntest, m->seed + 1000003, &err)))
            goto fail;
    }
    train_run_cfg cfg = {
        .bk = bk, .device = device, .m = m, .train = tr, .test = te,
        .cfg = {.microbatch = mbsize, .microbatches = nmicro, .opt = train_default_opt(okind)},
        .epochs = epochs, .steps = steps, .seed = m->seed, .log_every = logevery,
        .log = quiet ? NULL : stdout,
    };
    if (lr > 0) cfg.cfg.opt.lr = (float)lr;
    if (mom >= 0) cfg.cfg.opt.momentum = (float)mom;
    cfg.cfg.opt.weight_decay = (float)wd;
    train_result res;
    if (train_run(&cfg, &res, &err)) {
        /* bad sizes are the user's; backend failures are run-time failures */
        rc = strstr(err.msg, "--batch") ? 2 : 1;
        goto fail;
    }
    if (quiet)
        printf("final: train loss %.4f, test loss %.4f, test accuracy %.2f%%, %.0f samples/s\n",
               res.train_loss, res.test_loss, 100 * res.test_acc, res.samples_per_s);
    rc = 0;
    goto out;
fail:
    err_print(&err);
out:
    data_free(tr);
    data_free(te);
    plan_free(pl);
    model_free(m);
    return rc;
}
