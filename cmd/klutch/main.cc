// The `klutch` binary: all server-side commands in one executable.
#include "cli/commands.h"

int main(int argc, char** argv) { return klutch::cli::Main(argc, argv); }
