// The CPU backend's gated delta net (backend/cpu/cpu_backend.h, Backend::delta_net):
// the projections as weight products over the chunk, then token by token in
// order (each token's sequence state carries the previous one's, in place or
// into the next of its slots: kv::KvCache::StateStep), its value heads shared
// out between the threads.
#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "kernels/ref/ops_ref.h"
#include "backend/cpu/cpu_backend.h"

namespace strata::model {

namespace ops = kernels::ops;
namespace ref = kernels::ref;

void CpuBackend::delta_net(const LayerWeights& L) {
    const ModelConfig& c = cfg_;
    const SsmConfig& s = c.ssm;
    const int64_t n = n_, C = s.channels(), V = s.value_dim(), H = s.n_v_heads, Hk = s.n_k_heads, d = s.d_state;
    matmul(L.ssm_qkv, h_.data(), n, dn_mixed_.data());
    matmul(L.ssm_z, h_.data(), n, dn_z_.data());
    matmul(L.ssm_beta, h_.data(), n, dn_beta_.data());
    matmul(L.ssm_alpha, h_.data(), n, dn_alpha_.data());
    const int64_t part = s.state_floats();
    const int64_t offset = c.recurrent_state_offset(L.index);
    for (int64_t t = 0; t < n; ++t) {
        const kv::KvCache::StateStep slots = kv_->state_step(step_.seqs[t], step_.pos[t]);
        float* state = kv_->state_slot(slots.out, offset, part);
        if (slots.zero) std::fill(state, state + part, 0.0f);
        const float* state_in = slots.zero ? state : kv_->state_slot(slots.in, offset, part);
        float* conv = dn_conv_.data();
        ref::ssm_conv_step(dn_mixed_.data() + t * C, C, s.conv_kernel, L.ssm_conv.data(), state_in, state, conv);
        float* q = conv;
        float* k = conv + Hk * d;
        const float* v = conv + 2 * Hk * d;
        for (int64_t h = 0; h < Hk; ++h) {
            ref::l2_norm(q + h * d, q + h * d, d, c.norm_eps);
            ref::l2_norm(k + h * d, k + h * d, d, c.norm_eps);
        }
        float* g = dn_alpha_.data() + t * H;
        float* beta = dn_beta_.data() + t * H;
        ref::delta_gates(g, beta, L.ssm_dt_bias.data(), L.ssm_a.data(), H);
        const float* S_in = state_in + s.conv_state_floats();
        float* S = state + s.conv_state_floats();
        float* o = dn_o_.data() + t * V;
        const float* z = dn_z_.data() + t * V;
        // Value heads are independent: each thread its own heads' state and output.
        pool_->parallel_for(H, 1, [&](int64_t h0, int64_t h1, int) {
            ref::gated_delta_step(S_in, S, q, k, v, g, beta, h0, h1, Hk, d, o);
            for (int64_t h = h0; h < h1; ++h) {  // the gated norm: RMSNorm(o_h) * ssm_norm * silu(z_h)
                float* oh = o + h * d;
                ops::rmsnorm(oh, L.ssm_norm.data(), oh, d, c.norm_eps);
                ref::gate_mul(oh, z + h * d, d, /*silu=*/true);
            }
        });
    }
    matmul(L.ssm_out, dn_o_.data(), n, tmp_.data());
}

}  // namespace strata::model
