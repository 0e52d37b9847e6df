// Malicious and corrupt checkpoints: each must fail with the right exception type and a message
// that says what is wrong, never run a payload, crash or hang.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "error_test_util.h"
#include "io/pickle.h"
#include "vitrt/checkpoint.h"

namespace vitrt {
namespace {

using test::expect_error;

namespace fs = std::filesystem;

// Where the evil fixtures' payloads (os.system("touch ..."), eval("open(...)")) would write.
const char* kMarker = "/tmp/vitrt_checkpoint_pwned";

std::string fixture(const std::string& name) { return std::string(VITRT_FIXTURES) + "/checkpoint/" + name; }

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string write_tmp(const std::string& name, const std::vector<uint8_t>& bytes) {
  std::string path = std::string(VITRT_TEST_TMP) + "/" + name;
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return path;
}


void expect_checkpoint_error(const std::string& file, std::initializer_list<const char*> words) {
  SCOPED_TRACE(file);
  expect_error<CheckpointError>([&] { load_state_dict(fixture(file)); }, words);
}

struct Evil {
  const char* file;
  const char* named;  // what the error must name
};

class EvilFiles : public testing::TestWithParam<Evil> {};

TEST_P(EvilFiles, AreRefusedWithoutRunningThePayload) {
  fs::remove(kMarker);
  expect_checkpoint_error(GetParam().file, {GetParam().named});
  expect_error<CheckpointError>([&] { load_torch_checkpoint(fixture(GetParam().file)); }, {GetParam().named});
  EXPECT_FALSE(fs::exists(kMarker)) << "the payload ran";
}

INSTANTIATE_TEST_SUITE_P(Checkpoint, EvilFiles,
                         testing::Values(Evil{"evil_posix_system.pth", "posix.system"},
                                         Evil{"evil_builtins_eval.pth", "builtins.eval"},
                                         Evil{"evil_stack_global.pth", "os.system"},
                                         Evil{"evil_inst.pth", "INST"},
                                         Evil{"evil_in_state_dict.pth", "posix.system"}),
                         [](const testing::TestParamInfo<Evil>& info) {
                           std::string name = info.param.file;
                           return name.substr(0, name.find('.'));
                         });

TEST(BadCheckpoint, MissingFileIsAnIoError) {
  expect_error<IoError>([] { load_state_dict(fixture("no_such_file.pth")); }, {"no_such_file.pth"});
  expect_error<IoError>([] { load_safetensors(fixture("no_such_file.safetensors")); }, {"cannot open"});
}

TEST(BadCheckpoint, EmptyTruncatedAndGarbageFiles) {
  expect_checkpoint_error("empty.pth", {"empty"});
  expect_error<CheckpointError>([] { load_safetensors(fixture("empty.pth")); }, {"empty"});
  expect_checkpoint_error("truncated.pth", {"truncated"});
  expect_checkpoint_error("garbage.bin", {"unrecognised format"});
  expect_error<CheckpointError>([] { load_torch_checkpoint(fixture("garbage.bin")); }, {"central directory"});
  expect_error<CheckpointError>([] { load_safetensors(fixture("garbage.bin")); }, {"header length"});
  expect_checkpoint_error("legacy.pth", {"legacy torch.save format not supported"});
}

TEST(BadCheckpoint, InconsistentTorchArchives) {
  expect_checkpoint_error("missing_storage.pth", {"'w'", "archive/data/0", "missing"});
  expect_checkpoint_error("short_storage.pth", {"'w'", "too small"});
  expect_checkpoint_error("view_out_of_bounds.pth", {"'w'", "[1000]", "past the end"});
  expect_checkpoint_error("big_endian.pth", {"byte order", "big"});
  expect_checkpoint_error("compressed.pth", {"compressed"});
  expect_checkpoint_error("bad_local_offset.pth", {"local header"});
  expect_checkpoint_error("absurd_memo.pth", {"memo index 4294967280"});
  expect_checkpoint_error("not_a_state_dict.pth", {"'step'", "int", "expected a tensor"});
}

TEST(BadCheckpoint, InconsistentSafetensors) {
  expect_checkpoint_error("st_offsets_past_end.safetensors", {"'w'", "data_offsets"});
  expect_checkpoint_error("st_size_mismatch.safetensors", {"'w'", "needs 12"});
  expect_checkpoint_error("st_bad_dtype.safetensors", {"F8_E4M3"});
  expect_checkpoint_error("st_huge_header.safetensors", {"header length"});
  expect_checkpoint_error("st_bad_json.safetensors", {"JSON"});
}

// argparse.Namespace (a training script's "args") is read as plain data; NEWOBJ builds nothing
// else, and a Namespace takes no constructor arguments and only a dict as its state.
TEST(BadCheckpoint, OnlyArgparseNamespaceIsBuiltByNewobj) {
  auto unpickle = [](std::string body) {
    std::vector<uint8_t> pkl = {0x80, 0x02};
    pkl.insert(pkl.end(), body.begin(), body.end());
    pkl.push_back('.');
    return io::unpickle_torch(pkl, "newobj");
  };
  // Namespace(lr=0.5): GLOBAL, EMPTY_TUPLE, NEWOBJ, EMPTY_DICT, "lr", 0.5 as BININT1 5, SETITEM, BUILD
  io::PickleValuePtr ns = unpickle("cargparse\nNamespace\n)\x81}\x8c\x02lrK\x05sb");
  ASSERT_EQ(ns->kind, io::PickleValue::Kind::Dict);
  EXPECT_TRUE(ns->is_namespace);
  ASSERT_EQ(ns->entries.size(), 1u);
  EXPECT_EQ(ns->entries[0].first->text, "lr");
  expect_error<CheckpointError>([&] { unpickle("ccollections\nOrderedDict\n)\x81"); },
                                {"NEWOBJ", "collections.OrderedDict"});
  expect_error<CheckpointError>([&] { unpickle("cargparse\nNamespace\n(K\x01t\x81"); }, {"with arguments"});
  expect_error<CheckpointError>([&] { unpickle("cargparse\nNamespace\n)\x81K\x01" "b"); }, {"int state"});
  expect_error<CheckpointError>([&] { unpickle("cargparse\nArgumentParser\n)\x81"); }, {"argparse.ArgumentParser"});
  // The class itself is never called.
  expect_error<CheckpointError>([&] { unpickle("cargparse\nNamespace\n)R"); }, {"refusing to call argparse.Namespace"});
}

// A million nested tuples: parsing and freeing them must not recurse.
TEST(BadCheckpoint, DeeplyNestedPickleDoesNotOverflowTheStack) {
  std::vector<uint8_t> pkl = {0x80, 0x02, 'N'};
  pkl.insert(pkl.end(), 1'000'000, 0x85);  // TUPLE1
  pkl.push_back('.');
  io::PickleValuePtr v = io::unpickle_torch(pkl, "nested");
  EXPECT_EQ(v->kind, io::PickleValue::Kind::Tuple);
  v.reset();
}

TEST(BadCheckpoint, PickleGarbageOnlyThrowsCheckpointError) {
  std::mt19937 rng(11);
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> pkl(1 + rng() % 64);
    for (auto& b : pkl) b = static_cast<uint8_t>(rng());
    if (i % 2) pkl[0] = 0x80, pkl[1 % pkl.size()] = 2;  // get past PROTO half the time
    try {
      io::unpickle_torch(pkl, "fuzz");
    } catch (const CheckpointError&) {
    }
  }
}

// Random corruption of a valid archive: loading may succeed or throw a vitrt error, nothing else.
TEST(BadCheckpoint, MutatedArchivesOnlyThrowVitrtErrors) {
  const std::vector<uint8_t> good = read_bytes(fixture("tensors.pth"));
  ASSERT_FALSE(good.empty());
  std::mt19937 rng(5);
  int refused = 0;
  for (int i = 0; i < 400; ++i) {
    std::vector<uint8_t> bad = good;
    int flips = 1 + rng() % 4;
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
    if (i % 4 == 0) bad.resize(rng() % bad.size());
    std::string path = write_tmp("mutated.pth", bad);
    try {
      load_state_dict(path);
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace vitrt
