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
    "                     count toward --steps/--epochs and the data order continues\n"
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

/* How a pipelined run spans processes: the transport (NULL: local), this rank, the size. */
typedef struct procs {
    transport *tr;
    int rank, size, node_size;
} procs;

/* A pipelined (or traced) run: the pipeline train_from_plan makes (the plan's stages and
 * schedule, or `schedname` over nstages stages), over this process's transport. Returns
 * the exit status (0, 1 at run time, 2 for bad input) with err set on failure. */
static int run_pipelined(const train_run_cfg *cfg_in, const plan *pl, const char *schedname,
                         int nstages, int nmicro, int ndevices, const char *tracepath,
                         const procs *pr, train_result *res, plumb_err *err)
{
    train_run_cfg cfgv = *cfg_in, *cfg = &cfgv;
    train_pipeline tp;
    int rc = train_from_plan(cfg, pl, schedname, nstages, nmicro, &tp, err);
    if (rc) return rc;
    timeline *tl = NULL;
    rc = 1;
    int me = pr->rank;
    if (pr->tr) {
        int tpn = cfg->tp > 1 ? cfg->tp : 1;
        if (tp.sched->nworkers * tpn != pr->size) {
            char lay[96] = "";
            int dp = pl ? pl->stages[0].replicas : 0;
            for (int i = 0; pl && i < pl->nstages; i++)
                if (pl->stages[i].replicas != dp) dp = 0;
            if (dp && tp.sched->nworkers % dp == 0) /* every stage replicated dp times */
                snprintf(lay, sizeof lay, ": the plan's tp x pp x dp = %d x %d x %d", tpn,
                         tp.sched->nworkers / dp, dp);
            err_set(err, NULL, "--transport", "expected mpirun -np %d, one rank per worker of "
                    "the schedule%s%s (got %d ranks)", tp.sched->nworkers * tpn,
                    tpn > 1 ? " and tensor-parallel rank" : "", lay, pr->size);
            rc = 2;
            goto done;
        }
        cfg->tr = pr->tr;
        cfg->local_workers = &me;
        cfg->nlocal = 1;
        cfg->node_procs = pr->node_size;
        cfg->rank = pr->rank;
    }
    if (train_run_pipeline(cfg, tp.sched, tp.first, tp.last, ndevices, res,
                           tracepath ? &tl : NULL, err))
        goto done;
    if (tracepath && timeline_set_model(tl, cfg->m->name, tp.nstages, tp.tfirst, tp.tlast)) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    /* under mpirun every process holds the gathered trace: rank 0 writes it */
    if (tracepath && pr->rank == 0 && timeline_write_chrome(tl, tracepath, err)) goto done;
    rc = 0;
done:
    timeline_free(tl);
    train_pipeline_free(&tp);
    return rc;
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
    const char *data = NULL, *datadir = NULL, *textfile = NULL, *bkname = "cpu", *optname = NULL;
    int samples = 8192, epochs = 1, steps = 0, batch = 0, micro = 0, device = 0, logevery = 0;
    int quiet = 0, have_seed = 0, seed = 0, nstages = 0, ndevices = 1, recompute = 0;
    const char *schedname = NULL, *tracepath = NULL, *savepath = NULL, *resumepath = NULL;
    const char *ckdir = NULL, *trname = "local", *precision = NULL;
    int ckevery = 0, tpn = 1, sp = 0;
    double lr = -1, mom = -1, wd = 0, timeout = 0;
    int c;
    optind = 1;
    while ((c = cli_getopt("train", argc, argv, "h", longopts)) != -1) {
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
        case O_LR: if (cli_num("train", "--lr", optarg, 1, 1e3, &lr)) return 2; break;
        case O_MOM: if (cli_num("train", "--momentum", optarg, 0, 1, &mom)) return 2; break;
        case O_WD: if (cli_num("train", "--weight-decay", optarg, 0, 1e3, &wd)) return 2; break;
        case O_SEED: if (cli_int("train", "--seed", optarg, 0, 2147483647, &seed)) return 2;
            have_seed = 1; break;
        case O_BACKEND: bkname = optarg; break;
        case O_PRECISION: precision = optarg; break;
        case O_DEVICE: if (cli_int("train", "--device", optarg, 0, 1023, &device)) return 2; break;
        case O_LOG: if (cli_int("train", "--log-every", optarg, 1, 1 << 30, &logevery)) return 2; break;
        case O_QUIET: quiet = 1; break;
        case O_SCHED: schedname = optarg; break;
        case O_STAGES: if (cli_int("train", "--stages", optarg, 1, 1024, &nstages)) return 2; break;
        case O_TRACE: tracepath = optarg; break;
        case O_SAVE: savepath = optarg; break;
        case O_RECOMPUTE: recompute = 1; break;
        case O_RESUME: resumepath = optarg; break;
        case O_CKDIR: ckdir = optarg; break;
        case O_CKEVERY: if (cli_int("train", "--checkpoint-every", optarg, 1, 1 << 30, &ckevery)) return 2; break;
        case O_TRANSPORT: trname = optarg; break;
        case O_TIMEOUT: if (cli_num("train", "--timeout", optarg, 1, 1e6, &timeout)) return 2; break;
        case O_DEVICES: if (cli_int("train", "--devices", optarg, 1, 1024, &ndevices)) return 2; break;
        case O_TP: if (cli_int("train", "--tp", optarg, 1, 1024, &tpn)) return 2; break;
        case O_SP: sp = 1; break;
        case 'h':
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
    char kinds[160];
    if (schedname && sched_kind_parse(schedname) < 0)
        return cli_fail("train", "--schedule: expected %s (got \"%s\")",
                        sched_kind_list(kinds, sizeof kinds, ", "), schedname);
    if (schedname && npos == 2)
        return cli_fail("train", "--schedule: not with a plan (the plan names its schedule)");
    int tkind = !strcmp(trname, "local") ? 0 : !strcmp(trname, "mpi") ? 1
                : !strcmp(trname, "nccl") ? 2 : -1;
    if (tkind < 0)
        return cli_fail("train", "--transport: expected local, mpi or nccl (got \"%s\")", trname);
    if (tkind && !schedname && npos != 2 && tpn <= 1)
        return cli_fail("train", "--transport: for pipelined runs (a plan, --schedule or "
                        "--tp)");
    if (ndevices > 1 && tkind)
        return cli_fail("train", "--devices: not with --transport %s (each rank runs one "
                        "worker, on %s)", trname, tkind == 2 ? "its node-local GPU" :
                        "--device");
    if (sp && tpn < 2)
        return cli_fail("train", "--sequence-parallel: needs --tp 2 or more");
    if (tpn > 1 && npos == 2)
        return cli_fail("train", "--tp: not with a plan (the plan names its tp)");
    if (!ckdir != !ckevery)
        return cli_fail("train", "%s: needs %s", ckdir ? "--checkpoint" : "--checkpoint-every",
                        ckdir ? "--checkpoint-every N" : "--checkpoint DIR");
    if (tracepath && (savepath || resumepath || ckdir))
        return cli_fail("train", "--trace: not with checkpoints or --resume (a trace covers "
                        "one uninterrupted run)");
    /* outputs are checked before the run, so that a bad path costs no training */
    const char *reads[4] = {argv[optind], npos == 2 ? argv[optind + 1] : NULL, resumepath,
                            textfile};
    if ((savepath && outputs_ok("--save", savepath, reads, datadir)) ||
        (tracepath && outputs_ok("--trace", tracepath, reads, datadir)))
        return 2;
    if (ckdir && cli_folder_ok("train", "--checkpoint", ckdir, 1)) return 2;
    plumb_err cke = {{0}};
    if (ckdir && ckpt_dir_check_fresh(ckdir, resumepath, &cke))
        return cli_fail("train", "--checkpoint %s", cke.msg);
    if (tkind == 2 && strncmp(bkname, "cuda", 4))
        return cli_fail("train", "--transport nccl: needs a CUDA backend (--backend cuda, "
                        "cuda-tf32 or cuda-bf16)");
    /* plumb-mpi.so or plumb-nccl.so, loaded before any work: a missing one is one line */
    const plugin_api *tplug = NULL;
    if (tkind) {
        char opt[64];
        plumb_err perr = {{0}};
        snprintf(opt, sizeof opt, "--transport %s", trname);
        if (!(tplug = plugin_load(trname, opt, &perr))) return cli_fail("train", "%s", perr.msg);
    }
    rt_fault fault;
    plumb_err ferr = {{0}};
    if (rt_fault_parse(getenv("PLUMB_FAULT"), &fault, &ferr)) { err_print(&ferr); return 2; }
    if (recompute && !schedname && npos != 2 && tpn <= 1)
        return cli_fail("train", "--recompute: for pipelined runs (a plan or --schedule)");
    if (nstages && !schedname)
        return cli_fail("train", "--stages: needs --schedule");
    if (data && strcmp(data, "fashion-mnist") && strcmp(data, "synthetic") && strcmp(data, "text"))
        return cli_fail("train", "--data: expected fashion-mnist, synthetic or text (got \"%s\")",
                        data);

    plumb_err err = {{0}};
    int rc = 2;
    procs pr = {NULL, 0, 1, 1};
    bk_ctx *nccl_ctx = NULL;
    int mpi_on = 0;
    model *m = NULL;
    plan *pl = NULL;
    dataset *tr = NULL, *te = NULL;
    const backend *bk = cli_backend("train", bkname, precision);
    if (!bk) return 2;
    char *resume_found = NULL;
    ckpt resume_state = {0, 0, NULL, NULL, NULL}; /* read once, handed to the run */
    /* the devices must exist (GPUs for cuda): one line, status 2, before MPI starts; a
     * local pipelined run's workers use devices --device .. --device + --devices - 1 */
    int pipelined = npos == 2 || schedname || tracepath || tpn > 1;
    if (train_devices_check(bk, device, pipelined && !tkind ? ndevices : 1, &err)) {
        err_print(&err);
        return 2;
    }
    if (!(m = model_load(argv[optind], &err))) goto fail;
    if (tp_check(m, tpn, argv[optind], &err) ||
        (sp && tp_check_seq(m, tpn, argv[optind], &err)))
        goto fail; /* before any work */
    if (have_seed) m->seed = (unsigned long long)seed;
    int okind = optname ? optimizer_kind_parse(optname) : OPT_SGD;
    int mbsize = 0, nmicro = micro ? micro : 1;
    if (npos == 2) {
        if (!(pl = plan_load(argv[optind + 1], &err))) goto fail;
        /* nor may an output be the profile or cluster file the plan names */
        if ((tracepath && cli_plan_refs_ok("train", "--trace", tracepath, argv[optind + 1], pl)) ||
            (savepath && cli_plan_refs_ok("train", "--save", savepath, argv[optind + 1], pl))) {
            rc = 2;
            goto out;
        }
        if (train_plan_check(m, argv[optind], pl, argv[optind + 1], &err)) goto fail;
        if (!optname) okind = (int)pl->optimizer;
        if (!micro) nmicro = pl->microbatches;
        mbsize = pl->microbatch_size;
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
    if (model_check_batch(m, argv[optind], mbsize, 0, &err)) goto fail; /* before any work */
    if (resumepath) {
        if (!(resume_found = train_resume_open(resumepath, m, okind, &resume_state, &err)))
            goto fail;
        resumepath = resume_found;
        const char *found[1] = {resume_found}; /* --save onto the folder's newest */
        if (savepath && cli_output_ok("train", "--save", savepath, found, 1)) {
            rc = 2;
            goto out;
        }
    }
    train_data_spec dspec = {data, datadir, textfile, samples};
    if (train_data_load(m, argv[optind], &dspec, &tr, &te, &err)) goto fail;
    if (mbsize * nmicro > tr->n) {
        rc = cli_fail("train", "--batch: expected at most the %d samples of the %s data (got a "
                      "minibatch of %d)", tr->n, tr->name, mbsize * nmicro);
        goto out;
    }
    train_run_cfg cfg = {
        .bk = bk, .device = device, .m = m, .train = tr, .test = te,
        .cfg = {.microbatch = mbsize, .microbatches = nmicro, .opt = train_default_opt(okind)},
        .epochs = epochs, .steps = steps, .seed = m->seed, .log_every = logevery,
        .log = quiet ? NULL : stdout, .resume = resumepath,
        .resume_state = resume_found ? &resume_state : NULL, .save = savepath,
        .checkpoint_dir = ckdir, .checkpoint_every = ckevery,
        .recompute = recompute || (pl && pl->recompute), .fault = fault, .timeout_s = timeout,
        .tp = tpn, .sp = sp,
    };
    if (lr > 0) cfg.cfg.opt.lr = (float)lr;
    if (mom >= 0) cfg.cfg.opt.momentum = (float)mom;
    cfg.cfg.opt.weight_decay = (float)wd;
    train_result res;
    if (tplug) {
        /* from here a failure is this rank's own (status 1): the others may be waiting for
         * it in a collective, so the job must end with MPI_Abort, not MPI_Finalize */
        rc = 1;
        if (tplug->session_begin(&pr.rank, &pr.size, &pr.node_size, &err)) goto fail;
        mpi_on = 1;
        if (tplug->local_device) { /* nccl: this rank's GPU */
            int dev = tplug->local_device(0, &err);
            if (dev < 0 || !(nccl_ctx = bk->create(dev, &err))) goto fail;
            cfg.device = dev;
        }
        pr.tr = tplug->transport_create(nccl_ctx, timeout, &err);
        if (!pr.tr) goto fail;
        if (pr.rank != 0 && quiet) cfg.log = NULL;
        rc = 2;
    }
    if (!pl && !schedname && !tracepath && tpn <= 1) {
        if (train_run(&cfg, &res, &err)) {
            rc = 1; /* inputs were checked above: a failure at run time */
            goto fail;
        }
    } else {
        rc = run_pipelined(&cfg, pl, schedname, nstages, nmicro, ndevices, tracepath, &pr,
                           &res, &err);
        if (rc) goto fail;
    }
    if (quiet && pr.rank == 0)
        printf("final: train loss %.4f, test loss %.4f, test accuracy %.2f%%, %.0f samples/s\n",
               res.train_loss, res.test_loss, 100 * res.test_acc, res.samples_per_s);
    if (tracepath && pr.rank == 0)
        printf("trace written to %s (plumb compare reads it; open in https://ui.perfetto.dev)\n",
               tracepath);
    rc = 0;
    goto out;
fail:
    /* bad input (status 2) is found alike on every rank: rank 0 says it; a failure at run
     * time is the failing rank's own, and names it */
    if (!mpi_on || pr.size == 1 || rc != 2 || pr.rank == 0) {
        if (mpi_on && pr.size > 1 && rc != 2) fprintf(stderr, "[rank %d] ", pr.rank);
        err_print(&err);
    }
out:
    if (pr.tr) pr.tr->destroy(pr.tr);
    if (nccl_ctx) bk->destroy(nccl_ctx);
    if (mpi_on) tplug->session_end(rc);
    free(resume_found);
    ckpt_free(&resume_state);
    data_free(tr);
    data_free(te);
    plan_free(pl);
    model_free(m);
    return rc;
}
