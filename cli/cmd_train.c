/* cmd_train.c: `plumb train` (placeholder until its part lands; it refuses to run). */
#include "cli/cli.h"

int cmd_train(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("train", "this command is not built yet");
}
