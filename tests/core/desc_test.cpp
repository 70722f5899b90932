// Descriptors: RNN parameter layout (PyTorch order) and linear-layer sizes.
#include <gtest/gtest.h>

#include "prnn/device.h"
#include "prnn/error.h"
#include "prnn/layers.h"
#include "prnn/rnn.h"

namespace prnn {
namespace {

TEST(RnnDesc, ParamLayoutMatchesPyTorch) {
  // torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True): per (layer, dir) the tensors
  // weight_ih [20, in], weight_hh [20, 5], bias_ih [20], bias_hh [20], in = 3 then 10.
  RnnDesc d{Cell::LSTM, 3, 5, 2, Direction::Bidirectional, DType::F32};
  const std::int64_t l0 = 20 * 3 + 20 * 5 + 40;
  const std::int64_t l1 = 20 * 10 + 20 * 5 + 40;
  EXPECT_EQ(rnn_param_count(d), 2 * l0 + 2 * l1);
  const auto o = rnn_param_offsets(d, 1, 1);
  EXPECT_EQ(o.input_size, 10);
  EXPECT_EQ(o.w_ih, 2 * l0 + l1);
  EXPECT_EQ(o.w_hh, o.w_ih + 200);
  EXPECT_EQ(o.b_ih, o.w_hh + 100);
  EXPECT_EQ(o.b_hh, o.b_ih + 20);
  EXPECT_EQ(gate_count(Cell::GRU), 3);
  EXPECT_EQ(gate_count(Cell::ClippedReLU), 1);
  EXPECT_EQ(parse_cell("LSTM"), Cell::LSTM);
}

TEST(RnnDesc, RejectsBadSizes) {
  RnnDesc d{Cell::GRU, 3, 0, 1, Direction::Unidirectional, DType::F32};
  try {
    d.validate();
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "RnnDesc.hidden_size: expected >= 1, got 0");
  }
  d.hidden_size = 4;
  EXPECT_THROW(rnn_param_offsets(d, 1, 0), InvalidArgument);
  EXPECT_THROW(rnn_param_offsets(d, 0, 1), InvalidArgument);
  EXPECT_THROW(parse_cell("lstmx"), InvalidArgument);
}

TEST(LinearLayerDesc, SizesFollowTheFormulas) {
  LinearLayerDesc g{LinearLayerKind::Gilr, 3, 5, 1};
  EXPECT_EQ(g.param_count(), 2 * 5 * 3 + 2 * 5);
  LinearLayerDesc gl{LinearLayerKind::GilrLstm, 3, 5, 1};
  EXPECT_EQ(gl.param_count(), 6 * 5 * 3 + 4 * 5 * 5 + 6 * 5);
  EXPECT_EQ(gl.state_size(), 10);
  LinearLayerDesc s_same{LinearLayerKind::Sru, 5, 5, 1};
  LinearLayerDesc s_proj{LinearLayerKind::Sru, 3, 5, 1};
  EXPECT_EQ(s_same.projection_rows(), 15);
  EXPECT_EQ(s_proj.projection_rows(), 20);
  LinearLayerDesc q{LinearLayerKind::Qrnn, 3, 5, 2};
  EXPECT_EQ(q.projection_cols(), 6);
  EXPECT_EQ(q.param_count(), 15 * 6 + 15);
  LinearLayerDesc bad{LinearLayerKind::Sru, 3, 5, 2};
  try {
    bad.validate();
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "LinearLayerDesc.window: expected 1 for sru, got 2");
  }
  EXPECT_EQ(parse_linear_layer("GILR-LSTM"), LinearLayerKind::GilrLstm);
}

TEST(Device, CountIsConsistentWithInfo) {
  const int n = device_count();
  ASSERT_GE(n, 0);
  if (n == 0) {
    EXPECT_FALSE(no_device_reason().empty());
    EXPECT_THROW(device_info(0), InvalidArgument);
  } else {
    const DeviceInfo d = device_info(0);
    EXPECT_GT(d.sm_count, 0);
    EXPECT_GT(d.registers_per_sm, 0);
  }
  EXPECT_THROW(device_info(-1), InvalidArgument);
}

}  // namespace
}  // namespace prnn
