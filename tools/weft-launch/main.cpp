//===- weft-launch - Rerun a failed training job until it finishes --------===//
//
// torchrun's restart loop for weft: runs COMMAND (usually mpirun ... weft-run
// ... --resume DIR) and, when it fails, runs it again, up to --max-restarts
// times. weft-run --resume continues from the newest complete checkpoint,
// so each attempt picks up where the last one's checkpoints end. A usage
// error (exit 2) or a stop asked for by a signal to weft-launch is not
// retried.
//
//===----------------------------------------------------------------------===//
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

const char *const Usage =
    R"(usage: weft-launch [--max-restarts N] [--] COMMAND [ARGS...]

Runs COMMAND and reruns it when it fails (non-zero exit other than 2, or
killed by a signal), at most N more times (default 3). Give the training
command --resume DIR (and --save-every K) so that a rerun continues from the
newest complete checkpoint instead of step 0. SIGINT and SIGTERM are passed
to the command and end the loop. Exit status: the last attempt's (128+signal
when it was killed).
e.g. weft-launch --max-restarts 5 -- mpirun -np 4 weft-run PROG --data D \
       --steps 1000 --save-every 50 --resume ckpt
)";

volatile sig_atomic_t Stopping = 0;
volatile pid_t Child = 0;

void onSignal(int Sig) {
  Stopping = 1;
  if (Child > 0)
    kill(Child, Sig);
}

int usageError(const std::string &Msg) {
  std::cerr << "weft-launch: error: " << Msg
            << "\n(run weft-launch --help for usage)\n";
  return 2;
}

/// Runs Argv, returning its exit status (128+signal when killed), or -1.
int runOnce(std::vector<char *> &Argv) {
  pid_t Pid = fork();
  if (Pid < 0)
    return -1;
  if (Pid == 0) {
    // The child gets its own process group so that a terminal's ^C reaches
    // it only through weft-launch, which then stops retrying.
    setpgid(0, 0);
    execvp(Argv[0], Argv.data());
    std::fprintf(stderr, "weft-launch: error: cannot run '%s': %s\n", Argv[0],
                 std::strerror(errno));
    _exit(127);
  }
  Child = Pid;
  int St = 0;
  while (waitpid(Pid, &St, 0) < 0 && errno == EINTR) {
  }
  Child = 0;
  if (WIFSIGNALED(St))
    return 128 + WTERMSIG(St);
  return WEXITSTATUS(St);
}

} // namespace

int main(int Argc, char **Argv) {
  long MaxRestarts = 3;
  int I = 1;
  for (; I < Argc; ++I) {
    std::string A = Argv[I];
    if (A == "--help" || A == "-h") {
      std::cout << Usage;
      return 0;
    }
    if (A == "--") {
      ++I;
      break;
    }
    if (A == "--max-restarts" || A.rfind("--max-restarts=", 0) == 0) {
      std::string V = A.size() > 14  ? A.substr(15)
                      : I + 1 < Argc ? Argv[++I]
                                     : "";
      char *End = nullptr;
      errno = 0;
      MaxRestarts = std::strtol(V.c_str(), &End, 10);
      if (V.empty() || *End || errno || MaxRestarts < 0 || MaxRestarts > 1000)
        return usageError("bad value '" + V +
                          "' for --max-restarts (expected 0..1000)");
      continue;
    }
    if (A.rfind("--", 0) == 0)
      return usageError("unknown flag '" + A + "'");
    break;
  }
  if (I >= Argc)
    return usageError("no COMMAND given");
  std::vector<char *> Cmd(Argv + I, Argv + Argc);
  Cmd.push_back(nullptr);
  bool Resumes = false;
  for (int J = I; J < Argc; ++J)
    Resumes |= std::string(Argv[J]).rfind("--resume", 0) == 0;
  if (!Resumes)
    std::cerr << "weft-launch: warning: the command has no --resume: a "
                 "restart trains from step 0\n";

  struct sigaction SA {};
  SA.sa_handler = onSignal;
  sigaction(SIGINT, &SA, nullptr);
  sigaction(SIGTERM, &SA, nullptr);

  int Code = 0;
  for (long Attempt = 0;; ++Attempt) {
    auto T0 = std::chrono::steady_clock::now();
    Code = runOnce(Cmd);
    double Secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - T0)
            .count();
    if (Code == 0)
      break;
    std::fprintf(stderr,
                 "weft-launch: attempt %ld failed after %.1f s (%s %d)\n",
                 Attempt + 1, Secs, Code > 128 ? "signal" : "exit code",
                 Code > 128 ? Code - 128 : Code);
    if (Code == 2 || Code == 127 || Code < 0) {
      std::fprintf(stderr, "weft-launch: not retrying: %s\n",
                   Code == 2 ? "a usage error" : "the command cannot run");
      break;
    }
    if (Stopping) {
      std::fprintf(stderr, "weft-launch: stopped by a signal\n");
      break;
    }
    if (Attempt >= MaxRestarts) {
      std::fprintf(stderr, "weft-launch: giving up after %ld restart(s)\n",
                   MaxRestarts);
      break;
    }
    std::fprintf(stderr, "weft-launch: restart %ld of %ld\n", Attempt + 1,
                 MaxRestarts);
  }
  return Code < 0 ? 1 : Code;
}
