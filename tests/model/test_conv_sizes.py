"""One reading of a convolution's sizes (physics.spatial_size): an int kernel_size k of a 2-D
convolution is a k x k kernel for the GEMM dimensions and for the kernel features alike."""

from __future__ import annotations

import math

import pytest

from opcost.errors import OpcostError
from opcost.model.basis import gemm
from opcost.model.basis.features import Encoding, OpRecord
from opcost.model.basis.physics import conv_rank, gemm_dims, spatial_size


def test_sizes_as_pytorch_reads_them():
    assert spatial_size(3) == (3, 3)
    assert spatial_size(3, 3) == (3, 3, 3)
    assert spatial_size([5]) == (5, 5)
    assert spatial_size((3, 5)) == (3, 5)
    assert spatial_size([3, 5, 7], 2) == (3, 5)  # the kernel features' 2-D view of a 3-D size
    assert spatial_size([], 2) == (1, 1)
    with pytest.raises(OpcostError, match=r"convolution size \[3, 3\]: 2 values for 3 spatial axes"):
        spatial_size([3, 3], 3)


def test_the_rank_of_a_convolution():
    assert [conv_rank(k, ()) for k in ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "conv2d")] == [1, 2, 3, 2, 2]
    assert conv_rank("Conv", (8, 3, 10, 10, 10)) == 3 and conv_rank("Conv", ()) == 2


# Conv2d(16, 32, 3, padding=1, groups=g) on 8 x 16 x 28 x 28: M = 8 * 28 * 28, N = 32 / g, K = 16 / g * 3 * 3.
@pytest.mark.parametrize("kernel", [3, [3], (3, 3), [3, 3]])
@pytest.mark.parametrize("groups", [1, 4])
def test_an_int_kernel_size_is_the_whole_square_kernel(kernel, groups):
    hp = {"in_channels": 16, "out_channels": 32, "kernel_size": kernel, "groups": groups}
    assert gemm_dims("Conv2d", hp, (8, 16, 28, 28), [[8, 32, 28, 28]]) == (6272.0, 32.0 / groups, 144.0 / groups)
    assert gemm.kernel_features("Conv2d", hp)[:2] == [3.0, 3.0]


def test_other_ranks_count_their_own_axes():
    conv1d = {"in_channels": 6, "out_channels": 4, "kernel_size": 5}
    assert gemm_dims("Conv1d", conv1d, (2, 6, 100), [[2, 4, 96]]) == (192.0, 4.0, 30.0)
    conv3d = {"in_channels": 2, "out_channels": 8, "kernel_size": 3}
    assert gemm_dims("Conv3d", conv3d, (1, 2, 10, 10, 10), [[1, 8, 8, 8, 8]]) == (512.0, 8.0, 54.0)


def test_the_encoded_row_reads_an_int_kernel_as_its_tuple():
    metrics = {"flops": 2 * 6272 * 32 * 144, "bytes_read": 4 * (8 * 16 * 28 * 28 + 32 * 144),
               "bytes_written": 4 * 6272 * 32, "params": 32 * 144, "is_view": False,
               "output_shapes": [[8, 32, 28, 28]]}  # fmt: skip
    hp = {"in_channels": 16, "out_channels": 32, "stride": 1, "padding": 1, "groups": 1}
    enc = Encoding("physical", ("Conv2d",), "A30")
    as_int = OpRecord("c", "Conv2d", {**hp, "kernel_size": 3}, (8, 16, 28, 28), 8 * 16 * 28 * 28, metrics)
    as_pair = OpRecord("c", "Conv2d", {**hp, "kernel_size": [3, 3]}, (8, 16, 28, 28), 8 * 16 * 28 * 28, metrics)
    a, b = (dict(zip(enc.columns, enc.row(r, None))) for r in (as_int, as_pair))
    assert a == b
    assert (a["kernel_h"], a["kernel_w"], a["winograd_3x3"]) == (3.0, 3.0, 1.0)
    assert a["log_gemm_k"] == pytest.approx(math.log1p(144.0), rel=1e-15)
