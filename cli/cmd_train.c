/* cmd_train.c: `plumb train MODEL.json [PLAN.json]`: trains a model for real on the CPU or
 * CUDA backend, with progress lines and a final test accuracy. A plan supplies the stages,
 * replicas, tp, microbatching and optimizer (exec/train_plan.h decides how). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/plan.h"
#include "core/schedule.h"
#include "core/timeline.h"
#include "exec/backend.h"
#include "exec/data.h"
#include "exec/model.h"
#include "exec/train.h"
#include "exec/plugin.h"
#include "exec/train_plan.h"
#include "exec/tp.h"
#include "exec/train_setup.h"

static const char *const usage_text =
    "usage: plumb train MODEL.json [PLAN.json] [OPTIONS]\n"
    "\n"
    "Trains the model (a plumb-model/1 spec) for real and prints progress and a final test\n"
    "accuracy. With a plan, its stages, replicas, schedule, tp, sequence parallelism,\n"
    "microbatch size and count, recomputation and optimizer are used; a plan of plumb plan\n"
    "--model runs on the spec of the same transformer (examples/llm/gpt-mini.json's on\n"
    "examples/models/gpt-mini.json; docs/exec.md, \"Training a 3D plan\").\n"
    "\n"
    "  --data KIND        fashion-mnist, synthetic or text (default: fashion-mnist for\n"
    "                     [1,28,28] inputs with 10 classes, text for token models with\n"
    "                     256 classes or more, else synthetic)\n"
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
    "  --schedule KIND    run pipelined without a plan: gpipe, 1f1b-flush, pipedream, 2bw,\n"
    "                     interleaved, zb-h1, zb-v or dualpipev (layers split by FLOPs)\n"
    "  --stages N         pipeline stages for --schedule (default 2; virtual stages for\n"
    "                     interleaved, zb-v and dualpipev, 2 per worker)\n"
    "  --tp T             tensor parallelism: each worker a group of T ranks over which the\n"
    "                     transformer blocks, the embedding, the output layer and the loss\n"
    "                     are split (Megatron's layout; T must divide the heads, the MLP\n"
    "                     width and the vocabulary); threads, or with --transport mpi|nccl\n"
    "                     one process per rank (mpirun -np workers x T)\n"
    "  --sequence-parallel  with --tp: the residual stream and the layer norms on 1/T of\n"
    "                     the sequence per rank (gathered before, scattered after the split\n"
    "                     layers); with every schedule, the zero-bubble ones included\n"
    "  --recompute        pipelined: keep stage inputs only and recompute activations in\n"
    "                     the backward (default: the plan's choice)\n"
    "  --trace FILE       write the measured trace (Chrome trace JSON, as plumb sim's;\n"
    "                     under mpirun every process's workers, gathered by rank 0)\n"
    "  --save FILE        write a checkpoint (weights, optimizer state, steps) at the end\n"
    "  --checkpoint DIR   with --checkpoint-every N: a checkpoint every N steps and at the\n"
    "                     end in DIR (ckpt-STEP.ckpt, the 2 newest kept; pipelined runs are\n"
    "                     drained at each one)\n"
    "  --checkpoint-every N  steps between checkpoints\n"
    "  --resume PATH      start from a checkpoint file, or the newest in a folder; its steps\n"
    "                     count toward --steps/--epochs (which may not be fewer) and the\n"
    "                     data order continues\n"
    "  --transport NAME   pipelined: local (workers as threads, default), mpi (one CPU\n"
    "                     worker per rank) or nccl (one GPU worker per rank); mpi and nccl\n"
    "                     run under mpirun -np WORKERS, rank 0 printing and writing files\n"
    "  --timeout S        seconds a worker waits for a message before failing (default 120)\n"
    "  --backend NAME     cpu, cpu-bf16, cuda, cuda-tf32 or cuda-bf16 (default cpu)\n"
    "  --precision P      fp32, tf32 or bf16: the arithmetic of GEMMs and convolutions\n"
    "                     (bf16: inputs rounded to bf16, fp32 accumulation and master\n"
    "                     weights); --backend cuda --precision bf16 is cuda-bf16\n"
    "  --device N         device index for the backend (default 0); pipelined, the first\n"
    "                     of the workers' devices; --transport nccl: not used (each rank\n"
    "                     takes its node-local GPU)\n"
    "  --devices N        pipelined: spread the workers over N backend devices, worker w\n"
    "                     on device --device + w mod N (default 1; all must exist; local\n"
    "                     transport only: under mpirun each rank takes one device)\n"
    "  --log-every N      steps between progress lines (default: about 20 lines)\n"
    "  --quiet            print only the final lines\n"
    "  -h, --help         this text\n";

enum {
    O_DATA = 1000, O_DATADIR, O_TEXT, O_SAMPLES, O_EPOCHS, O_STEPS, O_BATCH, O_MICRO, O_OPT,
    O_LR, O_MOM, O_WD, O_SEED, O_BACKEND, O_DEVICE, O_LOG, O_QUIET, O_HELP, O_SCHED,
    O_STAGES, O_TRACE, O_DEVICES, O_SAVE, O_RESUME, O_RECOMPUTE, O_CKDIR, O_CKEVERY,
    O_TRANSPORT, O_TIMEOUT, O_PRECISION, O_TP, O_SP
};

/* plumb train's long options; their values go to train_opts (parse_options). */
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
    {"schedule", required_argument, 0, O_SCHED},  {"stages", required_argument, 0, O_STAGES},
    {"trace", required_argument, 0, O_TRACE},     {"devices", required_argument, 0, O_DEVICES},
    {"save", required_argument, 0, O_SAVE},       {"resume", required_argument, 0, O_RESUME},
    {"recompute", no_argument, 0, O_RECOMPUTE},   {"checkpoint", required_argument, 0, O_CKDIR},
    {"checkpoint-every", required_argument, 0, O_CKEVERY},
    {"transport", required_argument, 0, O_TRANSPORT},
    {"timeout", required_argument, 0, O_TIMEOUT},
    {"precision", required_argument, 0, O_PRECISION},
    {"tp", required_argument, 0, O_TP},
    {"sequence-parallel", no_argument, 0, O_SP},
    {0, 0, 0, 0}};

/* The command line of one `plumb train`, with the defaults --help gives (parse_options);
 * otherwise a NULL string or a 0 number is an option not given, and lr and mom < 0. */
typedef struct train_opts {
    const char *model_path, *plan_path; /* the file arguments; plan_path NULL without one */
    const char *data, *datadir, *textfile, *bkname, *optname, *precision;
    const char *schedname, *tracepath, *savepath, *resumepath, *ckdir, *trname;
    int samples, epochs, steps, batch, micro, device, logevery, quiet, have_seed, seed;
    int nstages, ndevices, recompute, ckevery, tpn, sp;
    int tkind; /* --transport: 0 local, 1 mpi, 2 nccl (set by check_options) */
    double lr, mom, wd, timeout;
} train_opts;

/* How a pipelined run spans processes: the transport (NULL: local), this rank, the size. */
typedef struct procs {
    transport *tr;
    int rank, size, node_size;
} procs;

/* What a run holds from its setup to its end; job_free releases it. */
typedef struct train_job {
    const backend *bk;
    const plugin_api *tplug; /* --transport mpi or nccl; NULL: local */
    model *m;
    plan *pl;                /* NULL without a plan */
    dataset *train, *test;
    char *resume_found;      /* the checkpoint resumed from (a folder's newest), or NULL */
    ckpt resume_state;       /* read once, handed to the run */
    int nmicro, mbsize, okind; /* microbatches, their size, the optimizer kind */
    train_run_cfg cfg;       /* points into the job: the job must not move once it is set */
    procs pr;                /* this process under mpirun; rank 0 of 1 alone */
    bk_ctx *nccl_ctx;        /* nccl: this rank's context, which the transport uses */
    int mpi_on;              /* the MPI session began: job_free ends it */
} train_job;

/* Whether the run is pipelined (train_run_pipeline) rather than sequential (train_run): a
 * plan, --schedule, --trace or --tp. */
static int is_pipelined(const train_opts *o)
{
    return o->plan_path || o->schedname || o->tracepath || o->tpn > 1;
}

/* Parses argv into o (defaults first). 0, 1 after printing --help, or 2 after one line (a
 * bad value, an unknown option, not one or two file arguments). */
static int parse_options(int argc, char **argv, train_opts *o)
{
    *o = (train_opts){.bkname = "cpu", .trname = "local", .samples = 8192, .epochs = 1,
                      .ndevices = 1, .tpn = 1, .lr = -1, .mom = -1};
    const char *cmd = "train";
    int c;
    optind = 1;
    while ((c = cli_getopt(cmd, argc, argv, "h", longopts)) != -1) {
        switch (c) {
        case O_DATA: o->data = optarg; break;
        case O_DATADIR: o->datadir = optarg; break;
        case O_TEXT: o->textfile = optarg; break;
        case O_SAMPLES:
            if (cli_int(cmd, "--samples", optarg, 1, 1 << 24, &o->samples)) return 2;
            break;
        case O_EPOCHS: if (cli_int(cmd, "--epochs", optarg, 1, 100000, &o->epochs)) return 2; break;
        case O_STEPS: if (cli_int(cmd, "--steps", optarg, 1, 1 << 30, &o->steps)) return 2; break;
        case O_BATCH: if (cli_int(cmd, "--batch", optarg, 1, 1 << 20, &o->batch)) return 2; break;
        case O_MICRO:
            if (cli_int(cmd, "--microbatches", optarg, 1, 1 << 16, &o->micro)) return 2;
            break;
        case O_OPT: o->optname = optarg; break;
        case O_LR: if (cli_num(cmd, "--lr", optarg, 1, 1e3, &o->lr)) return 2; break;
        case O_MOM: if (cli_num(cmd, "--momentum", optarg, 0, 1, &o->mom)) return 2; break;
        case O_WD: if (cli_num(cmd, "--weight-decay", optarg, 0, 1e3, &o->wd)) return 2; break;
        case O_SEED: if (cli_int(cmd, "--seed", optarg, 0, 2147483647, &o->seed)) return 2;
            o->have_seed = 1; break;
        case O_BACKEND: o->bkname = optarg; break;
        case O_PRECISION: o->precision = optarg; break;
        case O_DEVICE: if (cli_int(cmd, "--device", optarg, 0, 1023, &o->device)) return 2; break;
        case O_LOG:
            if (cli_int(cmd, "--log-every", optarg, 1, 1 << 30, &o->logevery)) return 2;
            break;
        case O_QUIET: o->quiet = 1; break;
        case O_SCHED: o->schedname = optarg; break;
        case O_STAGES: if (cli_int(cmd, "--stages", optarg, 1, 1024, &o->nstages)) return 2; break;
        case O_TRACE: o->tracepath = optarg; break;
        case O_SAVE: o->savepath = optarg; break;
        case O_RECOMPUTE: o->recompute = 1; break;
        case O_RESUME: o->resumepath = optarg; break;
        case O_CKDIR: o->ckdir = optarg; break;
        case O_CKEVERY:
            if (cli_int(cmd, "--checkpoint-every", optarg, 1, 1 << 30, &o->ckevery)) return 2;
            break;
        case O_TRANSPORT: o->trname = optarg; break;
        case O_TIMEOUT: if (cli_num(cmd, "--timeout", optarg, 1, 1e6, &o->timeout)) return 2; break;
        case O_DEVICES:
            if (cli_int(cmd, "--devices", optarg, 1, 1024, &o->ndevices)) return 2;
            break;
        case O_TP: if (cli_int(cmd, "--tp", optarg, 1, 1024, &o->tpn)) return 2; break;
        case O_SP: o->sp = 1; break;
        case 'h':
        case O_HELP: fputs(usage_text, stdout); return 1;
        default: return 2;
        }
    }
    int npos = argc - optind;
    if (npos < 1 || npos > 2)
        return cli_fail("train", "expected MODEL.json and an optional PLAN.json (got %d file "
                        "arguments); see plumb train --help", npos);
    o->model_path = argv[optind];
    o->plan_path = npos == 2 ? argv[optind + 1] : NULL;
    return 0;
}

/* Checks the options against each other, needing no file, and sets o->tkind. 0, or 2
 * after one line. */
static int check_options(train_opts *o)
{
    if (o->optname && optimizer_kind_parse(o->optname) < 0)
        return cli_fail("train", "--optimizer: expected sgd, momentum or adam (got \"%s\")",
                        o->optname);
    char kinds[160];
    if (o->schedname && sched_kind_parse(o->schedname) < 0)
        return cli_fail("train", "--schedule: expected %s (got \"%s\")",
                        sched_kind_list(kinds, sizeof kinds, ", "), o->schedname);
    if (o->schedname && o->plan_path)
        return cli_fail("train", "--schedule: not with a plan (the plan names its schedule)");
    const char *trname = o->trname;
    o->tkind = !strcmp(trname, "local") ? 0 : !strcmp(trname, "mpi") ? 1
               : !strcmp(trname, "nccl") ? 2 : -1;
    if (o->tkind < 0)
        return cli_fail("train", "--transport: expected local, mpi or nccl (got \"%s\")", trname);
    if (o->tkind && !o->schedname && !o->plan_path && o->tpn <= 1)
        return cli_fail("train", "--transport: for pipelined runs (a plan, --schedule or "
                        "--tp)");
    if (o->ndevices > 1 && o->tkind)
        return cli_fail("train", "--devices: not with --transport %s (each rank runs one "
                        "worker, on %s)", trname, o->tkind == 2 ? "its node-local GPU" :
                        "--device");
    if (o->datadir && !*o->datadir) /* else "/train-images-idx3-ubyte.gz: cannot open" */
        return cli_fail("train", "--data-dir: expected a folder (got \"\")");
    if (o->sp && o->tpn < 2)
        return cli_fail("train", "--sequence-parallel: needs --tp 2 or more");
    if (o->tpn > 1 && o->plan_path)
        return cli_fail("train", "--tp: not with a plan (the plan names its tp)");
    if (!o->ckdir != !o->ckevery)
        return cli_fail("train", "%s: needs %s", o->ckdir ? "--checkpoint" : "--checkpoint-every",
                        o->ckdir ? "--checkpoint-every N" : "--checkpoint DIR");
    if (o->tracepath && (o->savepath || o->resumepath || o->ckdir))
        return cli_fail("train", "--trace: not with checkpoints or --resume (a trace covers "
                        "one uninterrupted run)");
    return 0;
}

/* 0 when output path (option opt) is none of the files the run reads: reads[4] (the model,
 * the plan, the checkpoint it resumes, its text; NULLs skipped) and Fashion-MNIST's four
 * files in datadir (a folder to resume from is checked once its newest checkpoint is
 * found); else 2 after cli_output_ok's one line. */
static int outputs_ok(const char *opt, const char *path, const char *const reads[4],
                      const char *datadir)
{
    static const char *const fmn[4] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                       "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
    char fm[4][4200];
    const char *inputs[8];
    for (int k = 0; k < 4; k++) {
        snprintf(fm[k], sizeof fm[k], "%s/%s", datadir ? datadir : FMNIST_DIR, fmn[k]);
        inputs[k] = reads[k];
        inputs[4 + k] = fm[k];
    }
    return cli_output_ok("train", opt, path, inputs, 8);
}

/* Checks the outputs before the run, so that a bad path costs no training: --save and
 * --trace (outputs_ok), and the --checkpoint folder, which must be this run's own
 * (ckpt_dir_check_fresh). 0, or 2 after one line. */
static int check_outputs(const train_opts *o)
{
    const char *reads[4] = {o->model_path, o->plan_path, o->resumepath, o->textfile};
    if ((o->savepath && outputs_ok("--save", o->savepath, reads, o->datadir)) ||
        (o->tracepath && outputs_ok("--trace", o->tracepath, reads, o->datadir)))
        return 2;
    if (o->ckdir && cli_folder_ok("train", "--checkpoint", o->ckdir, 1)) return 2;
    if (o->savepath && o->ckdir && ckpt_dir_owns(o->ckdir, o->savepath))
        return cli_fail("train", "--save %s: is a checkpoint name of the --checkpoint folder "
                        "(ckpt-STEP.ckpt), whose files of the same step replace it and whose "
                        "pruning removes it; expected another name", o->savepath);
    plumb_err cke = {{0}};
    if (o->ckdir && ckpt_dir_check_fresh(o->ckdir, o->resumepath, &cke))
        return cli_fail("train", "--checkpoint %s", cke.msg);
    return 0;
}

/* Loads the plugin of --transport mpi or nccl (plumb-mpi.so or plumb-nccl.so) into *plug,
 * before any work, so that a missing one is one line; *plug is NULL for local. 0, or 2
 * after one line (nccl without a CUDA backend, the plugin missing or not built). */
static int load_transport(const train_opts *o, const plugin_api **plug)
{
    *plug = NULL;
    if (o->tkind == 2 && strncmp(o->bkname, "cuda", 4))
        return cli_fail("train", "--transport nccl: needs a CUDA backend (--backend cuda, "
                        "cuda-tf32 or cuda-bf16)");
    if (!o->tkind) return 0;
    char opt[64];
    plumb_err perr = {{0}};
    snprintf(opt, sizeof opt, "--transport %s", o->trname);
    if (!(*plug = plugin_load(o->trname, opt, &perr))) return cli_fail("train", "%s", perr.msg);
    return 0;
}

/* The last checks that need no file: PLUMB_FAULT (into *fault), and the options that only a
 * pipelined run or a schedule takes, and --data. 0, or 2 after one line. */
static int check_run_options(const train_opts *o, rt_fault *fault)
{
    plumb_err ferr = {{0}};
    if (rt_fault_parse(getenv("PLUMB_FAULT"), fault, &ferr)) {
        err_print(&ferr);
        return 2;
    }
    if (o->recompute && !o->schedname && !o->plan_path && o->tpn <= 1)
        return cli_fail("train", "--recompute: for pipelined runs (a plan or --schedule)");
    if (o->nstages && !o->schedname)
        return cli_fail("train", "--stages: needs --schedule");
    const char *d = o->data;
    if (d && strcmp(d, "fashion-mnist") && strcmp(d, "synthetic") && strcmp(d, "text"))
        return cli_fail("train", "--data: expected fashion-mnist, synthetic or text (got \"%s\")",
                        d);
    return 0;
}

/* 2 after printing err's line: a setup step's bad input. */
static int setup_fail(const plumb_err *err)
{
    err_print(err);
    return 2;
}

/* The model (with --seed) and the plan, each checked against the other and --tp before any
 * work; an output may not be a file the plan names. 0, or 2 after one line. */
static int job_load_model(const train_opts *o, train_job *j)
{
    plumb_err err = {{0}};
    if (!(j->m = model_load(o->model_path, &err))) return setup_fail(&err);
    if (tp_check(j->m, o->tpn, o->model_path, &err) ||
        (o->sp && tp_check_seq(j->m, o->tpn, o->model_path, &err)))
        return setup_fail(&err);
    if (o->have_seed) j->m->seed = (unsigned long long)o->seed;
    if (!o->plan_path) return 0;
    if (!(j->pl = plan_load(o->plan_path, &err))) return setup_fail(&err);
    /* nor may an output be the profile or cluster file the plan names */
    if ((o->tracepath && cli_plan_refs_ok("train", "--trace", o->tracepath, o->plan_path, j->pl)) ||
        (o->savepath && cli_plan_refs_ok("train", "--save", o->savepath, o->plan_path, j->pl)))
        return 2;
    if (train_plan_check(j->m, o->model_path, j->pl, o->plan_path, &err)) return setup_fail(&err);
    return 0;
}

/* The optimizer, the microbatch count and size: the options', else the plan's, else sgd,
 * 1 and 64 / count; the model must take that microbatch. 0, or 2 after one line. */
static int job_minibatch(const train_opts *o, train_job *j)
{
    j->okind = o->optname ? optimizer_kind_parse(o->optname) : OPT_SGD;
    j->nmicro = o->micro ? o->micro : 1;
    j->mbsize = 0;
    if (j->pl) {
        if (!o->optname) j->okind = (int)j->pl->optimizer;
        if (!o->micro) j->nmicro = j->pl->microbatches;
        j->mbsize = j->pl->microbatch_size;
    }
    if (o->batch) {
        if (o->batch % j->nmicro)
            return cli_fail("train", "--batch: expected a multiple of the %d microbatches (got "
                            "%d)", j->nmicro, o->batch);
        j->mbsize = o->batch / j->nmicro;
    } else if (!j->mbsize) {
        j->mbsize = 64 / j->nmicro > 0 ? 64 / j->nmicro : 1;
    }
    plumb_err err = {{0}};
    if (model_check_batch(j->m, o->model_path, j->mbsize, 0, &err)) return setup_fail(&err);
    return 0;
}

/* The checkpoint of --resume (a file, or a folder's newest), read once into the job;
 * --save may not be that file. 0, or 2 after one line. */
static int job_resume(const train_opts *o, train_job *j)
{
    if (!o->resumepath) return 0;
    plumb_err err = {{0}};
    j->resume_found = train_resume_open(o->resumepath, j->m, j->okind, &j->resume_state, &err);
    if (!j->resume_found) return setup_fail(&err);
    const char *found[1] = {j->resume_found}; /* --save onto the folder's newest */
    if (o->savepath && cli_output_ok("train", "--save", o->savepath, found, 1)) return 2;
    return 0;
}

/* The training and test sets, which must hold a minibatch. 0, or 2 after one line. */
static int job_load_data(const train_opts *o, train_job *j)
{
    plumb_err err = {{0}};
    train_data_spec dspec = {o->data, o->datadir, o->textfile, o->samples};
    if (train_data_load(j->m, o->model_path, &dspec, &j->train, &j->test, &err))
        return setup_fail(&err);
    if (j->mbsize * j->nmicro > j->train->n)
        return cli_fail("train", "--batch: expected at most the %d samples of the %s data (got "
                        "a minibatch of %d)", j->train->n, j->train->name,
                        j->mbsize * j->nmicro);
    return 0;
}

/* The run's total steps (--steps, or --epochs passes over the loaded data) against the
 * checkpoint it resumes: fewer than the checkpoint took trained nothing and exited 0, as if
 * the run had been done. 0, or 2 after one line. */
static int job_check_steps(const train_opts *o, const train_job *j)
{
    if (!o->resumepath) return 0;
    long done = j->resume_state.step, per_epoch = j->train->n / (j->mbsize * j->nmicro);
    long total = o->steps > 0 ? o->steps : (long)o->epochs * per_epoch;
    const char *ck = j->resume_found ? j->resume_found : o->resumepath;
    if (total >= done) return 0;
    if (o->steps > 0)
        return cli_fail("train", "--steps %d: expected at least the %ld steps that --resume %s "
                        "took (the run's total, the checkpoint's steps included)", o->steps,
                        done, ck);
    return cli_fail("train", "--epochs %d: expected at least the %ld steps that --resume %s "
                    "took (got %ld steps of %ld per epoch; --steps or --epochs count the "
                    "checkpoint's steps too)", o->epochs, done, ck, total, per_epoch);
}

/* The run's configuration from the options and what the job loaded. */
static void job_config(const train_opts *o, const rt_fault *fault, train_job *j)
{
    j->cfg = (train_run_cfg){
        .bk = j->bk, .device = o->device, .m = j->m, .train = j->train, .test = j->test,
        .cfg = {.microbatch = j->mbsize, .microbatches = j->nmicro,
                .opt = train_default_opt(j->okind)},
        .epochs = o->epochs, .steps = o->steps, .seed = j->m->seed, .log_every = o->logevery,
        .log = o->quiet ? NULL : stdout,
        .resume = j->resume_found ? j->resume_found : o->resumepath,
        .resume_state = j->resume_found ? &j->resume_state : NULL, .save = o->savepath,
        .checkpoint_dir = o->ckdir, .checkpoint_every = o->ckevery,
        .recompute = o->recompute || (j->pl && j->pl->recompute), .fault = *fault,
        .timeout_s = o->timeout, .tp = o->tpn, .sp = o->sp,
    };
    if (o->lr > 0) j->cfg.cfg.opt.lr = (float)o->lr;
    if (o->mom >= 0) j->cfg.cfg.opt.momentum = (float)o->mom;
    j->cfg.cfg.opt.weight_decay = (float)o->wd;
}

/* Everything the run needs that this process can find alone, in the order of the checks'
 * cost: model and plan, minibatch, checkpoint, data, then j->cfg. 0, or 2 after one line. */
static int job_setup(const train_opts *o, const rt_fault *fault, train_job *j)
{
    if (job_load_model(o, j) || job_minibatch(o, j) || job_resume(o, j) ||
        job_load_data(o, j) || job_check_steps(o, j))
        return 2;
    job_config(o, fault, j);
    return 0;
}

/* Under --transport mpi or nccl: begins the MPI session, takes this rank's GPU (nccl) and
 * creates its transport, a collective. 0 (at once for local), or 1 with err set: from
 * here a failure is this rank's own, and the others may wait for it in a collective, so
 * the job must end with MPI_Abort (job_free's session_end(1)), not MPI_Finalize. */
static int job_join(const train_opts *o, train_job *j, plumb_err *err)
{
    const plugin_api *p = j->tplug;
    if (!p) return 0;
    if (p->session_begin(&j->pr.rank, &j->pr.size, &j->pr.node_size, err)) return 1;
    j->mpi_on = 1;
    if (p->local_device) { /* nccl: this rank's GPU */
        int dev = p->local_device(0, err);
        if (dev < 0 || !(j->nccl_ctx = j->bk->create(dev, err))) return 1;
        j->cfg.device = dev;
    }
    j->pr.tr = p->transport_create(j->nccl_ctx, o->timeout, err);
    if (!j->pr.tr) return 1;
    if (j->pr.rank != 0 && o->quiet) j->cfg.log = NULL;
    return 0;
}

/* 0 when the processes under mpirun (pr) are one per endpoint of the schedule's nworkers
 * workers (each a group of tpn ranks), else 2 with err set naming the count expected and,
 * for a plan whose every stage has the same replicas, its tp x pp x dp layout. */
static int check_ranks(const procs *pr, const plan *pl, int nworkers, int tpn, plumb_err *err)
{
    if (nworkers * tpn == pr->size) return 0;
    char lay[96] = "";
    int dp = pl ? pl->stages[0].replicas : 0;
    for (int i = 0; pl && i < pl->nstages; i++)
        if (pl->stages[i].replicas != dp) dp = 0;
    if (dp && nworkers % dp == 0) /* every stage replicated dp times */
        snprintf(lay, sizeof lay, ": the plan's tp x pp x dp = %d x %d x %d", tpn,
                 nworkers / dp, dp);
    err_set(err, NULL, "--transport", "expected mpirun -np %d, one rank per worker of the "
            "schedule%s%s (got %d ranks)", nworkers * tpn,
            tpn > 1 ? " and tensor-parallel rank" : "", lay, pr->size);
    return 2;
}

/* A pipelined (or traced) run: the pipeline train_from_plan makes (the plan's stages and
 * schedule, or --schedule over --stages stages), over this process's transport, its trace
 * written by rank 0. Returns the exit status (0, 1 at run time, 2 for bad input) with err
 * set on failure. */
static int run_pipelined(const train_opts *o, const train_job *j, train_result *res,
                         plumb_err *err)
{
    train_run_cfg cfgv = j->cfg, *cfg = &cfgv;
    train_pipeline tp;
    int rc = train_from_plan(cfg, j->pl, o->schedname, o->nstages, j->nmicro, &tp, err);
    if (rc) return rc;
    timeline *tl = NULL;
    const char *tracepath = o->tracepath;
    int me = j->pr.rank;
    if (j->pr.tr) {
        if ((rc = check_ranks(&j->pr, j->pl, tp.sched->nworkers, cfg->tp > 1 ? cfg->tp : 1, err)))
            goto done;
        cfg->tr = j->pr.tr;
        cfg->local_workers = &me;
        cfg->nlocal = 1;
        cfg->node_procs = j->pr.node_size;
        cfg->rank = j->pr.rank;
    }
    rc = 1;
    if (train_run_pipeline(cfg, tp.sched, tp.first, tp.last, o->ndevices, res,
                           tracepath ? &tl : NULL, err))
        goto done;
    if (tracepath && timeline_set_model(tl, cfg->m->name, tp.nstages, tp.tfirst, tp.tlast)) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    /* under mpirun every process holds the gathered trace: rank 0 writes it */
    if (tracepath && j->pr.rank == 0 && timeline_write_chrome(tl, tracepath, err)) goto done;
    rc = 0;
done:
    timeline_free(tl);
    train_pipeline_free(&tp);
    return rc;
}

/* Trains: sequentially, or pipelined. The exit status (0, 1 at run time, 2 for bad input
 * found by the pipeline's setup) with err set on failure. */
static int job_run(const train_opts *o, train_job *j, train_result *res, plumb_err *err)
{
    if (is_pipelined(o)) return run_pipelined(o, j, res, err);
    return train_run(&j->cfg, res, err) ? 1 : 0; /* inputs were checked: a run-time failure */
}

/* The final lines, rank 0's: the figures under --quiet, where the trace went. */
static void job_report(const train_opts *o, const train_job *j, const train_result *res)
{
    if (o->quiet && j->pr.rank == 0 && res->steps_run > 0)
        printf("final: train loss %.4f, test loss %.4f, test accuracy %.2f%%, %.0f samples/s\n",
               res->train_loss, res->test_loss, 100 * res->test_acc, res->samples_per_s);
    else if (o->quiet && j->pr.rank == 0) /* resumed at the end: nothing trained, no train loss */
        printf("final: no step trained (the checkpoint had all %ld), test loss %.4f, test "
               "accuracy %.2f%%\n", res->steps, res->test_loss, 100 * res->test_acc);
    if (o->tracepath && j->pr.rank == 0)
        printf("trace written to %s (plumb compare reads it; open in https://ui.perfetto.dev)\n",
               o->tracepath);
}

/* Prints err, the failure (status rc) of job_join or job_run: bad input (status 2) is
 * found alike on every rank, so rank 0 says it; a failure at run time is the failing
 * rank's own, and names it. */
static void job_say_failure(const train_job *j, int rc, const plumb_err *err)
{
    int many = j->mpi_on && j->pr.size > 1;
    if (many && rc == 2 && j->pr.rank != 0) return;
    if (many && rc != 2) fprintf(stderr, "[rank %d] ", j->pr.rank);
    err_print(err);
}

/* Releases what the job holds and ends its MPI session with status rc (MPI_Abort unless 0
 * or 2). */
static void job_free(train_job *j, int rc)
{
    if (j->pr.tr) j->pr.tr->destroy(j->pr.tr);
    if (j->nccl_ctx) j->bk->destroy(j->nccl_ctx);
    if (j->mpi_on) j->tplug->session_end(rc);
    free(j->resume_found);
    ckpt_free(&j->resume_state);
    data_free(j->train);
    data_free(j->test);
    plan_free(j->pl);
    model_free(j->m);
}

int cmd_train(int argc, char **argv)
{
    train_opts o;
    int rc = parse_options(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : 2;
    const plugin_api *tplug = NULL;
    rt_fault fault = {0};
    if (check_options(&o) || check_outputs(&o) || load_transport(&o, &tplug) ||
        check_run_options(&o, &fault))
        return 2;
    const backend *bk = cli_backend("train", o.bkname, o.precision);
    if (!bk) return 2;
    /* the devices must exist (GPUs for cuda): one line, status 2, before MPI starts; a
     * local pipelined run's workers use devices --device .. --device + --devices - 1 */
    plumb_err err = {{0}};
    if (train_devices_check(bk, o.device, is_pipelined(&o) && !o.tkind ? o.ndevices : 1,
                            &err))
        return setup_fail(&err);
    train_job j = {.bk = bk, .tplug = tplug, .resume_state = {0, 0, NULL, NULL, NULL},
                   .pr = {NULL, 0, 1, 1}};
    rc = job_setup(&o, &fault, &j);
    if (!rc) {
        train_result res;
        rc = job_join(&o, &j, &err);
        if (!rc) rc = job_run(&o, &j, &res, &err);
        if (rc) job_say_failure(&j, rc, &err);
        else job_report(&o, &j, &res);
    }
    job_free(&j, rc);
    return rc;
}
