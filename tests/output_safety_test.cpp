// Output safety through the real CLI: an output that is one of the inputs is refused (the input
// stays as it was), a pre-existing "<out>.partial" is never followed or written into, a second
// conversion to the same output is refused while the first runs, a stale temporary file is
// cleared, interrupting signals remove the temporary file, and a FIFO named like a shard is
// refused instead of blocking for ever.
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <sstream>
#include <sys/stat.h>

#include "test_support.h"

using tsup::run_cli;

namespace {

class OutputSafety : public tsup::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    gen::Spec spec;
    gen::write_checkpoint(path("model"), spec);
  }
  std::string shard() const { return path("model/model.safetensors"); }

  // A run that must fail with one error line holding every string of `names`.
  tsup::RunResult expect_refused(const std::vector<std::string>& args, const std::vector<std::string>& names) {
    const tsup::RunResult r = run_cli(args, dir, 60.0);
    EXPECT_FALSE(r.timed_out) << r.describe();
    EXPECT_FALSE(r.signaled) << r.describe();
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    const auto lines = r.error_lines();
    EXPECT_EQ(lines.size(), 1u) << r.describe();
    for (const std::string& n : names)
      if (!lines.empty()) EXPECT_NE(lines[0].find(n), std::string::npos) << "error line lacks '" << n << "': " << lines[0];
    return r;
  }
};

TEST_F(OutputSafety, OutputThatIsAnInputIsRefusedAndTheInputKept) {
  const std::vector<uint8_t> shard_bytes = tsup::slurp(shard());
  const std::string config = tsup::slurp_text(path("model/config.json"));
  // The shard itself (folder and single-file sources), config.json, a link to the shard, a hard
  // link to it, and the shard named through another spelling of its path.
  ::symlink(shard().c_str(), path("link.gguf-lite").c_str());
  ASSERT_EQ(::link(shard().c_str(), path("hard.gguf-lite").c_str()), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {shard(), path("model")},
      {shard(), shard()},
      {path("model/config.json"), path("model")},
      {path("link.gguf-lite"), path("model")},
      {path("hard.gguf-lite"), path("model")},
      {path("model/../model/model.safetensors"), path("model")},
  };
  for (const auto& [out, model] : cases) {
    SCOPED_TRACE(out + " from " + model);
    for (const char* fmt : {"gguf-lite", "gguf", "leap"}) {
      SCOPED_TRACE(fmt);
      expect_refused({out, "--model", model, "--format", fmt, "--no-vocab", "--quiet"}, {out, "input"});
      EXPECT_FALSE(tsup::exists(out + ".partial"));
    }
  }
  EXPECT_EQ(tsup::slurp(shard()), shard_bytes) << "the shard was overwritten";
  EXPECT_EQ(tsup::slurp_text(path("model/config.json")), config) << "config.json was overwritten";
  // A --schemes file is an input too.
  gen::write_text(path("rules.json"), "[]");
  expect_refused({path("rules.json"), "--model", path("model"), "--format", "gguf-lite", "--schemes", path("rules.json"),
                  "--quiet"},
                 {"rules.json", "input"});
  EXPECT_EQ(tsup::slurp_text(path("rules.json")), "[]");
}

TEST_F(OutputSafety, SymlinkedPartialIsNotFollowed) {
  gen::write_text(path("victim"), "keep me");
  const std::string out = path("out.gguf-lite");
  ASSERT_EQ(::symlink(path("victim").c_str(), (out + ".partial").c_str()), 0);
  expect_refused({out, "--model", path("model"), "--quiet"}, {out, ".partial", "symbolic link"});
  EXPECT_EQ(tsup::slurp_text(path("victim")), "keep me");
  EXPECT_FALSE(tsup::exists(out));
  struct stat st;
  ASSERT_EQ(::lstat((out + ".partial").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link was replaced";
  // A .partial that is a hard link to another file is not ours either.
  ::unlink((out + ".partial").c_str());
  ASSERT_EQ(::link(path("victim").c_str(), (out + ".partial").c_str()), 0);
  expect_refused({out, "--model", path("model"), "--quiet"}, {out, ".partial"});
  EXPECT_EQ(tsup::slurp_text(path("victim")), "keep me");
}

TEST_F(OutputSafety, SecondWriterIsRefusedWhileTheFirstHoldsTheOutput) {
  // A conversion in progress holds an exclusive lock on <out>.partial; stand in for it here.
  const std::string out = path("out.gguf-lite");
  gen::write_text(out, "previous");
  const int fd = ::open((out + ".partial").c_str(), O_RDWR | O_CREAT | O_EXCL, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "first writer's bytes", 20), 20);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  expect_refused({out, "--model", path("model"), "--quiet"}, {out, "another conversion"});
  EXPECT_EQ(tsup::slurp_text(out + ".partial"), "first writer's bytes") << "the first writer's file was touched";
  EXPECT_EQ(tsup::slurp_text(out), "previous");
  ::close(fd);
}

TEST_F(OutputSafety, TwoConcurrentConversionsNeverBothSucceedOnOneOutput) {
  gen::Spec spec;
  spec.dim = 256;
  spec.hidden = 768;
  spec.layers = 4;
  spec.vocab = 2000;
  spec.keep_values = false;
  gen::write_checkpoint(path("big"), spec);
  const std::string out = path("out.gguf-lite");
  const std::vector<std::string> a = {out, "--model", path("big"), "--scheme", "q4", "--threads", "1", "--quiet"};
  const auto rs = tsup::run_many({a, a}, dir, 120.0, 2048, 2);
  int ok = 0;
  for (const auto& r : rs) {
    ASSERT_FALSE(r.signaled) << r.describe();
    if (r.exit_code == 0) ++ok;
    else {
      ASSERT_EQ(r.error_lines().size(), 1u) << r.describe();
      EXPECT_NE(r.error_lines()[0].find("another conversion"), std::string::npos) << r.describe();
    }
  }
  EXPECT_GE(ok, 1);  // one, or both when they did not overlap in time; never a mix
  const auto one = run_cli({path("ref.gguf-lite"), "--model", path("big"), "--scheme", "q4", "--quiet"}, dir, 120.0);
  ASSERT_EQ(one.exit_code, 0) << one.describe();
  EXPECT_EQ(tsup::slurp(out), tsup::slurp(path("ref.gguf-lite")));
  EXPECT_FALSE(tsup::exists(out + ".partial"));
}

TEST_F(OutputSafety, StalePartialIsRemovedEvenWhenTheRunFails) {
  const std::string out = path("out.gguf-lite");
  gen::write_text(out + ".partial", "left by a killed run");
  // A run that fails on its input still clears the stale file, and says so.
  gen::write_text(path("model/config.json"), "{not json");
  const auto r = expect_refused({out, "--model", path("model"), "--quiet"}, {"config.json"});
  EXPECT_NE(r.err.find("removed " + out + ".partial"), std::string::npos) << r.describe();
  EXPECT_FALSE(tsup::exists(out + ".partial"));
  EXPECT_FALSE(tsup::exists(out));
  // And a good run replaces it with the real output.
  gen::Spec spec;
  gen::write_checkpoint(path("model"), spec);
  gen::write_text(out + ".partial", "left by a killed run");
  const auto ok = run_cli({out, "--model", path("model"), "--quiet"}, dir);
  EXPECT_EQ(ok.exit_code, 0) << ok.describe();
  EXPECT_FALSE(tsup::exists(out + ".partial"));
  EXPECT_EQ(tsup::slurp(out).size() > 100, true);
}

// An unlocked .partial that a running WebAssembly CLI writes (it cannot flock: its
// <out>.partial.lock names it, wasm/node_pre.js) is refused as a locked one; a lock naming a pid
// now used by another process (a different start time) does not stop the run.
TEST_F(OutputSafety, WasmWritersLockFileIsRespected) {
  const std::string out = path("out.gguf-lite");
  const std::string stat = tsup::slurp_text("/proc/self/stat");
  std::istringstream f(stat.substr(stat.rfind(')') + 2));
  std::string field, start;
  for (int i = 0; i < 20 && f >> field; ++i) start = field;
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  auto lock = [&](const std::string& s) {
    gen::write_text(out + ".partial.lock", "{\"pid\":" + std::to_string(::getpid()) + ",\"start\":\"" + s + "\",\"host\":\"" + host + "\"}\n");
  };
  gen::write_text(out + ".partial", "a live wasm run's bytes");
  lock(start);  // this test process: alive
  expect_refused({out, "--model", path("model"), "--quiet"}, {"another conversion is writing this output"});
  EXPECT_EQ(tsup::slurp_text(out + ".partial"), "a live wasm run's bytes");
  lock(start + "0");  // the pid reused by someone else: the file is stale
  const auto ok = run_cli({out, "--model", path("model"), "--quiet"}, dir);
  EXPECT_EQ(ok.exit_code, 0) << ok.describe();
  EXPECT_FALSE(tsup::exists(out + ".partial"));
}

TEST_F(OutputSafety, OutputSymlinkIsReplacedAndSaidSo) {
  gen::write_text(path("elsewhere"), "target");
  const std::string out = path("out.gguf-lite");
  ASSERT_EQ(::symlink(path("elsewhere").c_str(), out.c_str()), 0);
  const auto r = run_cli({out, "--model", path("model"), "--quiet"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("warning: " + out + " is a symbolic link"), std::string::npos) << r.describe();
  EXPECT_EQ(tsup::slurp_text(path("elsewhere")), "target");
  struct stat st;
  ASSERT_EQ(::lstat(out.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST_F(OutputSafety, FifoNamedLikeAShardIsRefusedNotWaitedOn) {
  ASSERT_EQ(::mkfifo(path("model/zz-extra.safetensors").c_str(), 0644), 0);
  const auto t0 = std::chrono::steady_clock::now();
  expect_refused({path("out.gguf-lite"), "--model", path("model"), "--quiet"}, {"zz-extra.safetensors", "pipe"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
  // A folder named like a shard, too.
  ::unlink(path("model/zz-extra.safetensors").c_str());
  std::filesystem::create_directories(path("model/zz-dir.safetensors"));
  expect_refused({path("out.gguf-lite"), "--model", path("model"), "--quiet"}, {"zz-dir.safetensors", "folder"});
  EXPECT_FALSE(tsup::exists(path("out.gguf-lite")));
  // The checkpoint's other files too: a FIFO tokenizer.json or config.json is named, not skipped.
  std::filesystem::remove(path("model/zz-dir.safetensors"));
  for (const char* f : {"tokenizer.json", "config.json"}) {
    std::filesystem::remove(path(std::string("model/") + f));
    ASSERT_EQ(::mkfifo(path(std::string("model/") + f).c_str(), 0644), 0);
    expect_refused({path("out.gguf-lite"), "--model", path("model"), "--quiet"}, {f, "pipe"});
  }
}

// A name that leaves no room for the lock file's suffix (255-byte file names) still converts,
// through <out>.partial created directly (O_EXCL, then locked).
TEST_F(OutputSafety, LongOutputNameStillWorks) {
  const std::string out = path(std::string(236, 'a') + ".gguf-lite");  // + ".partial" = 254 bytes
  const auto r = run_cli({out, "--model", path("model"), "--quiet"}, dir);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(tsup::exists(out));
  EXPECT_FALSE(tsup::exists(out + ".partial"));
}

// Every interrupting signal removes the temporary file (the process then dies of the signal).
TEST_F(OutputSafety, InterruptingSignalsRemoveThePartialFile) {
  gen::Spec spec;
  spec.dim = 512;
  spec.hidden = 1536;
  spec.layers = 6;
  spec.vocab = 4000;
  spec.keep_values = false;
  gen::write_checkpoint(path("big"), spec);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) {
    SCOPED_TRACE(strsignal(sig));
    const std::string out = path("sig.gguf");
    bool caught = false;
    for (int attempt = 0; attempt < 5 && !caught; ++attempt) {
      tsup::Child c = tsup::spawn_cli({out, "--model", path("big"), "--type", "Q4_K_M", "--no-vocab", "--threads", "1",
                                       "--quiet"},
                                      dir, 2048);
      tsup::RunResult r;
      bool finished = false;
      while (!tsup::exists(out + ".partial") && !(finished = tsup::poll_cli(c, 60, &r)))
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (finished) {  // done before we looked
        std::filesystem::remove(out);
        continue;
      }
      ::kill(c.pid, sig);
      while (!tsup::poll_cli(c, 60, &r)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (!r.signaled) {  // it had just finished
        std::filesystem::remove(out);
        continue;
      }
      caught = true;
      EXPECT_EQ(r.signal, sig) << r.describe();
      EXPECT_FALSE(tsup::exists(out + ".partial")) << "left behind after " << strsignal(sig);
      EXPECT_FALSE(tsup::exists(out));
    }
    EXPECT_TRUE(caught) << "the conversion always finished before the signal";
  }
}

}  // namespace
