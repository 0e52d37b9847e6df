"""The CUDA LayerNorm's two forms of row statistics (src/ops/cuda/layer_norm_row.cuh), emulated in numpy
on bf16 rows in the kernel's order of operations (ViT-B/16's 768-wide rows: 16 lanes of 6 chunks of 8
values), against exact statistics:
- the double form: each lane's sum and squared deviations in double;
- F32STATS (bf16 inputs): each lane's sums in fp32 (the deviations from the fp32 mean m0, their sum
  correcting the mean), only the cross-lane sums in double.
The GPU tests check the kernels against the CPU; this checks the reason F32STATS is allowed: its
statistics stay far below a bf16 step, so the normalised bf16 outputs are the double form's except
for a rare rounding tie-break, also for rows whose mean is large against their spread (where a plain
fp32 sum would cancel badly)."""
import numpy as np

LANES, CHUNKS, V = 16, 6, 8
C = LANES * CHUNKS * V


def to_bf16(x):
    """Round float32 values to bf16 (nearest even), returned as float32."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def lane_values(row):
    """The values each lane holds, in its order: lane l, chunk k, value j is row[(k * LANES + l) * V + j]."""
    return row.reshape(CHUNKS, LANES, V).transpose(1, 0, 2).reshape(LANES, CHUNKS * V)


def group_sum(parts):
    """The butterfly reduction over 16 lanes in double (every lane ends with the same sum)."""
    p = np.array(parts, dtype=np.float64)
    o = LANES // 2
    while o:
        p = p + p[np.arange(LANES) ^ o]
        o //= 2
    return p[0]


def stats_double(row):
    vals = lane_values(row).astype(np.float64)
    mean = group_sum([sum(lv) for lv in vals]) / C
    var = group_sum([sum((x - mean) ** 2 for x in lv) for lv in vals]) / C
    return mean, var


def first_pass_mean_f32(row):
    """F32STATS's first pass: each lane's sum in fp32, the lanes' sums in double, the mean as fp32."""
    sums = []
    for lv in lane_values(row):
        s = np.float32(0)
        for x in lv:
            s = np.float32(s + x)
        sums.append(s)
    return np.float32(group_sum(sums) / C)


def stats_f32(row):
    vals = lane_values(row)
    m0 = first_pass_mean_f32(row)
    sds, sqs = [], []
    for lv in vals:
        sd, sq = np.float32(0), np.float32(0)
        for x in lv:
            d = np.float32(x - m0)
            sd = np.float32(sd + d)
            sq = np.float32(np.float64(d) * np.float64(d) + np.float64(sq))  # fmaf (one rounding)
        sds.append(sd)
        sqs.append(sq)
    dm = group_sum(sds) / C
    return np.float64(m0) + dm, max(group_sum(sqs) / C - dm * dm, 0.0)


def normalise(row, mean, var, eps=1e-6):
    """The kernel's fp32 normalisation (weight 1, bias 0), rounded to bf16."""
    rstd = np.float32(1.0 / np.sqrt(var + eps))
    return to_bf16(np.float32(np.float32(row - np.float32(mean)) * rstd))


def rows(seed, count, offset, scale):
    rng = np.random.default_rng(seed)
    return [to_bf16((offset + scale * rng.standard_normal(C)).astype(np.float32)) for _ in range(count)]


def test_f32_statistics_stay_far_below_a_bf16_step():
    worst_mean, worst_var, differ, total = 0.0, 0.0, 0, 0
    # A centred row, ViT-like outliers, and means 10 and 1000 times the spread.
    cases = [(1, 0.0, 1.0), (2, 0.5, 3.0), (3, 20.0, 2.0), (4, 1000.0, 1.0)]
    for seed, offset, scale in cases:
        for row in rows(seed, 40, offset, scale):
            if seed == 2:
                row[::97] *= 30  # a few large channels
            exact_mean = np.mean(row.astype(np.float64))
            exact_var = np.mean((row.astype(np.float64) - exact_mean) ** 2)
            m_d, v_d = stats_double(row)
            m_f, v_f = stats_f32(row)
            sd = np.sqrt(exact_var)
            worst_mean = max(worst_mean, abs(m_f - exact_mean) / sd)
            worst_var = max(worst_var, abs(v_f - exact_var) / exact_var)
            assert abs(m_d - exact_mean) / sd < 1e-12 and abs(v_d - exact_var) / exact_var < 1e-12
            a, b = normalise(row, m_d, v_d), normalise(row, m_f, v_f)
            differ += int(np.count_nonzero(a != b))
            total += a.size
            # A differing output is one bf16 step away at most.
            assert np.all(np.abs(a.astype(np.float64) - b) <= np.abs(a.astype(np.float64)) * 2.0 ** -7 + 1e-30)
    # The statistics: within 1e-6 of the row's spread (a bf16 step is 2^-8 = 3.9e-3 of a value); when
    # written, the mean within 5.5e-8 of the spread and the variance within 6.1e-7 of itself.
    assert worst_mean < 1e-6, worst_mean
    assert worst_var < 5e-6, worst_var
    # The outputs: the same bf16 values but for rare rounding tie-breaks (1 of 122880 when written).
    assert differ <= total * 1e-4, (differ, total)


def test_a_plain_fp32_sum_would_not_do():
    """Without the deviations' correction, a row far from zero loses its mean: the check above can fail."""
    row = rows(5, 1, 1000.0, 1.0)[0]
    m0 = first_pass_mean_f32(row)
    exact_mean = np.mean(row.astype(np.float64))
    sd = np.std(row.astype(np.float64))
    assert abs(np.float64(m0) - exact_mean) / sd > 1e-6  # the correction is needed
    m_f, _ = stats_f32(row)
    assert abs(m_f - exact_mean) / sd < 1e-6
