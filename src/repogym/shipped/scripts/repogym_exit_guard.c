/* repogym's exit guard for C and C++ test programs (LD_PRELOAD, set by the judge for ctest
 * runs, compiled by it at verification time).
 *
 * ctest passes a test whose program exits with status 0. A program of the build tree that
 * ends with status 0 before its main returned -- exit(0) or _exit(0) in a constructor or in a
 * function the tests call -- has not run its tests to the end: its status becomes 125, and
 * the test fails. Everything else passes through: other statuses, programs outside the build
 * tree (the compiler, cmake, ctest, shells), children a test program forks (death tests), and
 * exit() after main returned (how every C program ends).
 *
 * What it cannot stop: code that ends the process by a raw system call, or that finds and sets
 * this library's state. Statically linked test programs are not guarded (no preload). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int main_returned;
static pid_t main_pid;
static int decided = -1;
static int (*real_main)(int, char **, char **);

typedef void (*exit_fn)(int);

static int in_build_tree(void) {
  if (decided < 0) {
    const char *root = getenv("REPOGYM_EXIT_GUARD_ROOT");
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    size_t len = root ? strlen(root) : 0;
    decided = 0;
    if (len > 0 && n > 0) {
      exe[n] = 0;
      decided = strncmp(exe, root, len) == 0 && exe[len] == '/';
    }
  }
  return decided;
}

static void guard(int status) {
  if (status != 0 || main_returned || !in_build_tree()) return;
  if (main_pid != 0 && getpid() != main_pid) return; /* a forked child (a death test) */
  static const char msg[] =
      "repogym: the test program ended with status 0 before its main returned\n";
  ssize_t ignored = write(2, msg, sizeof msg - 1);
  (void)ignored;
  ((exit_fn)dlsym(RTLD_NEXT, "_exit"))(125);
}

void exit(int status) {
  guard(status);
  ((exit_fn)dlsym(RTLD_NEXT, "exit"))(status);
  __builtin_unreachable();
}

void _exit(int status) {
  guard(status);
  ((exit_fn)dlsym(RTLD_NEXT, "_exit"))(status);
  __builtin_unreachable();
}

void _Exit(int status) {
  guard(status);
  ((exit_fn)dlsym(RTLD_NEXT, "_Exit"))(status);
  __builtin_unreachable();
}

void quick_exit(int status) {
  guard(status);
  ((exit_fn)dlsym(RTLD_NEXT, "quick_exit"))(status);
  __builtin_unreachable();
}

static int guarded_main(int argc, char **argv, char **envp) {
  main_pid = getpid();
  int rc = real_main(argc, argv, envp);
  main_returned = 1;
  return rc;
}

typedef int (*start_fn)(int (*)(int, char **, char **), int, char **, void (*)(void),
                        void (*)(void), void (*)(void), void *);

int __libc_start_main(int (*main)(int, char **, char **), int argc, char **argv,
                      void (*init)(void), void (*fini)(void), void (*rtld_fini)(void),
                      void *stack_end) {
  start_fn real = (start_fn)dlsym(RTLD_NEXT, "__libc_start_main");
  real_main = main;
  return real(guarded_main, argc, argv, init, fini, rtld_fini, stack_end);
}
