// Package resident makes resident tiers: the non-expert tensors of a MoE
// model (attention, norms, embeddings, output, routers, shared experts,
// dense layers), which must sit on the accelerator, re-quantized to a
// llama-quantize mix or fitted to a byte budget, each written as a GGUF
// with a manifest that says exactly what it holds, where it came from and
// what it cost in quality (docs/format/resident-manifest.md).
//
// Fitting is a multiple-choice knapsack over each tensor's measured error
// per candidate type (Fit), solved exactly by branch and bound; it needs
// no accelerator, only a byte budget.
package resident
