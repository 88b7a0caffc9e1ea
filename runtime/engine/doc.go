// Package engine is gguftool's CPU inference engine for Mixture-of-Experts
// models: the forward passes of every architecture in Archs, sessions with
// their KV cache and recurrent state, batched steps of several sessions
// (EvalBatch) and sessions resumed from a saved prefix (ResumeSession),
// sampling, and the expert sources that let routed experts live in RAM
// (resident, the oracle) or be streamed from a pack through a bounded
// cache. Text goes in and out through package tokenizer; routing
// decisions go out through package trace.
//
// # Numerics
//
// Every matrix product is computed as llama.cpp's CPU backend computes it:
// the activations are converted to the weight type's vec_dot type and each
// weight row is dotted with them by quant.VecDot, which reproduces ggml's
// kernels bit for bit. Norms, RoPE, softmax and the router follow the ggml
// operators they replace (docs/engine.md). With F32 weights and an F32
// KV cache the log-probabilities agree with llama.cpp to about 1e-5.
// A pass that overflows (NaN, an infinity, or a hidden state the next
// norm cannot square in float32) fails with a NumericError naming the
// position and layer instead of returning logits no token can be drawn
// from.
//
// # Determinism
//
// The model's router decides which experts run; an expert source decides
// only where their bytes come from. Each expert's output is computed from
// the same bytes by the same code whatever source served it, rows are
// split among threads without changing any row's arithmetic, and the
// contributions are summed in the router's order once all have landed. So
// resident and streamed runs, any cache size or policy, any I/O completion
// order and any thread count give bit-identical logits. Every kernel
// computes each row alone, so a session evaluated in a batch with others,
// or resumed from a prefix, gets the logits it gets alone.
//
// # Backends
//
// The forward pass runs on a Backend: the CPU's, or a Vulkan device's
// (Options.GPU, over package gpu), which holds the resident weights, the
// activations and the KV and recurrent state in VRAM, and the routed
// experts too where Options.GPUExperts and the budget allow; with them,
// a kernel chooses each token's experts on the device as pickExperts
// does on the host, which chooses them when they run on the CPU. On a
// device the promises above hold among the
// device's own runs (run to run, streamed and resident, batched and
// alone); against the CPU the logits are close, not equal (docs/gpu.md).
package engine
