//===- StandaloneFuzzMain.cpp - The fuzz harnesses without libFuzzer ------===//
//
// A driver for the harnesses of fuzz/ in the ordinary build (GCC, no
// sanitizers, no coverage): `make fuzz-smoke`, part of `make check`, runs each
// harness for a short while without the clang + ASan build tree that `make
// fuzz` needs (a second build of the libraries, too long for CI). It reads
// libFuzzer's command line (scripts/fuzz.sh drives both):
//
//   HARNESS [-max_total_time=S] [-runs=N] [-seed=K] [-max_len=B] [-timeout=S]
//           [-artifact_prefix=P] [other -flags, ignored] CORPUS_DIR_OR_FILE...
//
// runs every corpus file once, then inputs mutated from them (the harness's
// LLVMFuzzerCustomMutator where it has one, else byte mutations: flips, random
// bytes, inserts, erases, copies, splices), or fresh random bytes where the
// corpus is empty, until the time or the count is reached. Without coverage
// nothing is added to the corpus: this finds what random inputs near the
// seeds reach, which is what a short run finds anyway. An input that crashes
// or times out is written to P crash-N / timeout-N ("Test unit written to",
// as libFuzzer says) before the process dies of the same signal. At the end
// libFuzzer's final stats lines (stat::number_of_executed_units, ...).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);
extern "C" __attribute__((weak)) size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                                                size_t maxSize, unsigned seed);

namespace {

std::mt19937_64 rng;
std::vector<std::vector<uint8_t>> corpus;

// What the signal handler writes: the input being run, and where.
const uint8_t *currentData = nullptr;
size_t currentSize = 0;
char artifactPrefix[4096] = "./";
volatile sig_atomic_t handling = 0;

size_t randomBelow(size_t n) { return n ? rng() % n : 0; }

void writeArtifact(const char *kind) {
  char path[4200];
  std::snprintf(path, sizeof path, "%s%s-%d", artifactPrefix, kind, static_cast<int>(getpid()));
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    if (currentSize)
      (void)!write(fd, currentData, currentSize);
    close(fd);
  }
  char line[4300];
  int n = std::snprintf(line, sizeof line, "==%d== %s; Test unit written to %s\n",
                        static_cast<int>(getpid()), kind, path);
  (void)!write(2, line, n);
}

void onCrash(int sig) {
  if (!handling) {
    handling = 1;
    writeArtifact(sig == SIGALRM ? "timeout" : "crash");
  }
  std::signal(sig == SIGALRM ? SIGABRT : sig, SIG_DFL);
  raise(sig == SIGALRM ? SIGABRT : sig);
}

void loadPath(const std::string &path, size_t maxLen) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    return;
  if (S_ISDIR(st.st_mode)) {
    DIR *dir = opendir(path.c_str());
    if (!dir)
      return;
    std::vector<std::string> names;
    while (struct dirent *e = readdir(dir))
      if (e->d_name[0] != '.')
        names.push_back(path + "/" + e->d_name);
    closedir(dir);
    std::sort(names.begin(), names.end()); // the same order on every machine
    for (const std::string &n : names)
      loadPath(n, maxLen);
    return;
  }
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  if (bytes.size() > maxLen)
    bytes.resize(maxLen);
  corpus.push_back(std::move(bytes));
}

} // namespace

/// libFuzzer's mutator, as harnesses with a custom mutator call it.
extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize) {
  switch (randomBelow(size ? 7 : 1)) {
  case 0: { // insert random bytes
    size_t n = std::min<size_t>(1 + randomBelow(8), maxSize - std::min(size, maxSize));
    size_t at = randomBelow(size + 1);
    std::memmove(data + at + n, data + at, size - at);
    for (size_t i = 0; i < n; ++i)
      data[at + i] = static_cast<uint8_t>(rng());
    return size + n;
  }
  case 1: // flip a bit
    data[randomBelow(size)] ^= static_cast<uint8_t>(1u << randomBelow(8));
    return size;
  case 2: { // a random or boundary byte
    static const uint8_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, '0', '9', '%', '[', ']'};
    data[randomBelow(size)] = randomBelow(2) ? static_cast<uint8_t>(rng())
                                             : kInteresting[randomBelow(sizeof kInteresting)];
    return size;
  }
  case 3: { // erase a range
    size_t at = randomBelow(size), n = 1 + randomBelow(std::min<size_t>(size - at, 16));
    std::memmove(data + at, data + at + n, size - at - n);
    return size - n;
  }
  case 4: { // copy a range over another
    size_t from = randomBelow(size), to = randomBelow(size);
    size_t n = 1 + randomBelow(std::min(size - from, size - to));
    std::memmove(data + to, data + from, n);
    return size;
  }
  case 5: { // splice in part of another corpus input
    if (corpus.empty())
      return size;
    const std::vector<uint8_t> &other = corpus[randomBelow(corpus.size())];
    if (other.empty())
      return size;
    size_t from = randomBelow(other.size()), at = randomBelow(size);
    size_t n = std::min(other.size() - from, maxSize - at);
    n = 1 + randomBelow(n);
    std::memcpy(data + at, other.data() + from, n);
    return std::max(size, at + n);
  }
  default: // truncate
    return 1 + randomBelow(size);
  }
}

namespace {

/// libFuzzer's flags that this driver reads.
struct Flags {
  double seconds = 0;
  uint64_t runs = 0, seed = 1;
  size_t maxLen = 4096;
  unsigned timeout = 0;
  std::vector<std::string> paths; ///< corpus directories and files
};

/// main's first step: libFuzzer's command line (-artifact_prefix= goes to
/// artifactPrefix); other -flags are ignored.
Flags parseFlags(int argc, char **argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *flag) -> const char * {
      size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? argv[i] + n : nullptr;
    };
    if (const char *v = value("-max_total_time="))
      f.seconds = std::atof(v);
    else if (const char *v = value("-runs="))
      f.runs = std::strtoull(v, nullptr, 10);
    else if (const char *v = value("-seed="))
      f.seed = std::strtoull(v, nullptr, 10);
    else if (const char *v = value("-max_len="))
      f.maxLen = std::max<size_t>(1, std::strtoull(v, nullptr, 10));
    else if (const char *v = value("-timeout="))
      f.timeout = static_cast<unsigned>(std::atoi(v));
    else if (const char *v = value("-artifact_prefix="))
      std::snprintf(artifactPrefix, sizeof artifactPrefix, "%s", v);
    else if (a.empty() || a[0] != '-')
      f.paths.push_back(a);
    // Other libFuzzer flags (-dict, -rss_limit_mb, -len_control, ...) mean nothing here.
  }
  return f;
}

/// The next input after the seeds: fresh random bytes where the corpus is
/// empty, else a corpus input mutated one to four times.
void nextInput(std::vector<uint8_t> &input, size_t maxLen) {
  if (corpus.empty()) { // fresh random bytes
    input.resize(1 + randomBelow(maxLen));
    for (uint8_t &b : input)
      b = static_cast<uint8_t>(rng());
    return;
  }
  const std::vector<uint8_t> &base = corpus[randomBelow(corpus.size())];
  input.assign(base.begin(), base.end());
  input.resize(maxLen);
  size_t size = base.size();
  for (size_t m = 1 + randomBelow(4); m > 0; --m)
    size = LLVMFuzzerCustomMutator
               ? LLVMFuzzerCustomMutator(input.data(), size, maxLen, static_cast<unsigned>(rng()))
               : LLVMFuzzerMutate(input.data(), size, maxLen);
  input.resize(std::min(size, maxLen));
}

/// main's last step: libFuzzer's final stats lines.
void printStats(uint64_t done, size_t seeds, double took) {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("#%llu\tDONE   (standalone driver: no coverage) corpus %zu\n",
              static_cast<unsigned long long>(done), seeds);
  std::printf("stat::number_of_executed_units: %llu\n", static_cast<unsigned long long>(done));
  std::printf("stat::average_exec_per_sec:     %llu\n",
              static_cast<unsigned long long>(took > 0 ? done / took : done));
  std::printf("stat::peak_rss_mb:              %ld\n", usage.ru_maxrss / 1024);
}

} // namespace

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  const Flags flags = parseFlags(argc, argv);
  const double seconds = flags.seconds;
  const uint64_t runs = flags.runs;
  const unsigned timeout = flags.timeout;
  if (seconds <= 0 && runs == 0) {
    std::fprintf(stderr, "%s: give -max_total_time=S or -runs=N\n", argv[0]);
    return 2;
  }
  rng.seed(flags.seed);
  for (const std::string &p : flags.paths)
    loadPath(p, flags.maxLen);
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGALRM})
    std::signal(sig, onCrash);

  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  uint64_t done = 0;
  auto runOne = [&](const std::vector<uint8_t> &input) {
    currentData = input.data();
    currentSize = input.size();
    if (timeout)
      alarm(timeout);
    LLVMFuzzerTestOneInput(input.data(), input.size());
    if (timeout)
      alarm(0);
    ++done;
  };
  auto more = [&] { return (runs == 0 || done < runs) && (seconds <= 0 || elapsed() < seconds); };
  const size_t seeds = corpus.size();
  for (size_t i = 0; i < seeds && more(); ++i)
    runOne(corpus[i]);
  std::vector<uint8_t> input;
  while (more()) {
    nextInput(input, flags.maxLen);
    runOne(input);
  }
  printStats(done, seeds, elapsed());
  return 0;
}
