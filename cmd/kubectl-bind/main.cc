// The `kubectl-bind` binary: the kubectl plugin behind `kubectl bind`.
#include "cli/kubectl_bind.h"

int main(int argc, char** argv) { return klutch::cli::KubectlBindMain(argc, argv); }
