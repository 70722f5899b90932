// The persistent RNN's knobs (gemm_rnn::PersistentKnobs::from_environment, README "Knobs"): what
// each value sets, and a malformed value an InvalidArgument naming the knob. Host code only: runs
// without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "gemm_rnn/gemm_rnn.h"
#include "prnn/error.h"
#include "support/env.h"

namespace prnn {
namespace {

using gemm_rnn::PersistentKnobs;
using persistent::TensorCores;
using test::EnvScope;

TEST(PersistentKnobs, UnsetAreTheDefaults) {
  const PersistentKnobs k = PersistentKnobs::from_environment();
  EXPECT_EQ(k.timeout_ns, 2'000'000'000ull);
  EXPECT_EQ(k.tensor_cores, TensorCores::ForwardBackward);
  EXPECT_EQ(k.gated_mma, TensorCores::ForwardBackward);
  EXPECT_EQ(k.finish_barrier, -1);
  EXPECT_EQ(k.input_projection, -1);
  EXPECT_EQ(k.exchange_places, 16);
  EXPECT_EQ(k.exchange_spacing, 256);
  EXPECT_EQ(k.stall_cta, -1);
  EXPECT_TRUE(k.graphs);
  EXPECT_TRUE(k.warp_rows);
}

TEST(PersistentKnobs, ValuesSetTheirFields) {
  {
    const EnvScope a("PRNN_PERSISTENT_TIMEOUT_MS", "250");
    const EnvScope b("PRNN_PERSISTENT_TENSOR_CORES", "forward");
    const EnvScope c("PRNN_PERSISTENT_GATED_MMA", "0");
    const EnvScope d("PRNN_PERSISTENT_FINISH_BARRIER", "1");
    const EnvScope e("PRNN_PERSISTENT_INPUT_PROJECTION", "0");
    const EnvScope f("PRNN_PERSISTENT_EXCHANGE_PLACES", "1");
    const EnvScope g("PRNN_PERSISTENT_GRAPHS", "0");
    const EnvScope h("PRNN_PERSISTENT_WARP_ROWS", "0");
    const EnvScope i("PRNN_PERSISTENT_STALL", "7:3:20");
    const EnvScope j("PRNN_PERSISTENT_EXCHANGE_SPACING", "4096");
    const PersistentKnobs k = PersistentKnobs::from_environment();
    EXPECT_EQ(k.timeout_ns, 250'000'000ull);
    EXPECT_EQ(k.tensor_cores, TensorCores::Forward);
    EXPECT_EQ(k.gated_mma, TensorCores::Off);
    EXPECT_EQ(k.finish_barrier, 1);
    EXPECT_EQ(k.input_projection, 0);
    EXPECT_EQ(k.exchange_places, 1);
    EXPECT_EQ(k.exchange_spacing, 4096);
    EXPECT_FALSE(k.graphs);
    EXPECT_FALSE(k.warp_rows);
    EXPECT_EQ(k.stall_cta, 7);
    EXPECT_EQ(k.stall_step, 3);
    EXPECT_EQ(k.stall_ns, 20'000'000ull);
  }
  const EnvScope places("PRNN_PERSISTENT_EXCHANGE_PLACES", "64");
  const EnvScope spacing("PRNN_PERSISTENT_EXCHANGE_SPACING", "1048576");
  EXPECT_EQ(PersistentKnobs::from_environment().exchange_places, 64);
  EXPECT_EQ(PersistentKnobs::from_environment().exchange_spacing, 1 << 20);
}

// An empty value is the same as unset.
TEST(PersistentKnobs, EmptyIsUnset) {
  const EnvScope a("PRNN_PERSISTENT_EXCHANGE_PLACES", "");
  const EnvScope b("PRNN_PERSISTENT_TENSOR_CORES", "");
  const PersistentKnobs k = PersistentKnobs::from_environment();
  EXPECT_EQ(k.exchange_places, 16);
  EXPECT_EQ(k.tensor_cores, TensorCores::ForwardBackward);
}

TEST(PersistentKnobs, MalformedIsInvalidArgumentNamingIt) {
  const std::pair<const char*, const char*> knobs[] = {
      {"PRNN_PERSISTENT_TIMEOUT_MS", "soon"},
      {"PRNN_PERSISTENT_STALL", "1:x"},
      {"PRNN_PERSISTENT_STALL", "1"},
      {"PRNN_PERSISTENT_TENSOR_CORES", "2"},
      {"PRNN_PERSISTENT_TENSOR_CORES", "fwd"},
      {"PRNN_PERSISTENT_FINISH_BARRIER", "yes"},
      {"PRNN_PERSISTENT_GRAPHS", "on"},
      {"PRNN_PERSISTENT_WARP_ROWS", "true"},
      {"PRNN_PERSISTENT_GATED_MMA", "backward"},
      {"PRNN_PERSISTENT_INPUT_PROJECTION", "2"},
      {"PRNN_PERSISTENT_EXCHANGE_PLACES", "0"},
      {"PRNN_PERSISTENT_EXCHANGE_PLACES", "65"},
      {"PRNN_PERSISTENT_EXCHANGE_PLACES", "x"},
      {"PRNN_PERSISTENT_EXCHANGE_PLACES", "-3"},
      {"PRNN_PERSISTENT_EXCHANGE_PLACES", " 8"},
      {"PRNN_PERSISTENT_EXCHANGE_PLACES", "+8"},
      // A sign or a value past the field's range is refused, not wrapped.
      {"PRNN_PERSISTENT_TIMEOUT_MS", "-1"},
      {"PRNN_PERSISTENT_TIMEOUT_MS", "99999999999999999999"},
      {"PRNN_PERSISTENT_TIMEOUT_MS", "18446744073710"},
      {"PRNN_PERSISTENT_STALL", "-1:0:5"},
      {"PRNN_PERSISTENT_STALL", "0:4294967296:5"},
      {"PRNN_PERSISTENT_EXCHANGE_SPACING", "0"},
      {"PRNN_PERSISTENT_EXCHANGE_SPACING", "100"},
      {"PRNN_PERSISTENT_EXCHANGE_SPACING", "200"},  // in range, not a multiple of 128
      {"PRNN_PERSISTENT_EXCHANGE_SPACING", "1048704"},
      {"PRNN_PERSISTENT_EXCHANGE_SPACING", "4k"}};
  for (const auto& [name, value] : knobs) {
    const EnvScope knob(name, value);
    try {
      (void)PersistentKnobs::from_environment();
      ADD_FAILURE() << "expected InvalidArgument for " << name << "=" << value;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace prnn
