"""What several kernel families share, one package per engine (the families import them; an engine never
imports a family).

- ``norm``: KernelIndex's Triton RMSNorm and LayerNorm (kernels, launch settings, autograd) and what their
  two adapters share.
- ``gated_mlp``: KernelIndex's gated MLP (PyTorch GEMMs around Triton activations) behind GeGLU and SwiGLU,
  and the gated-MLP adapter they (and the tiled MLPs) build on.
- ``tiled_mlp``: the tiled gated MLP's adapter (tiled GeGLU, tiled SwiGLU): Liger's and DeepSpeed's tiling.
- ``lm_head``: inputs, Liger loaders and the cost model of every loss over an LM head.
- ``preference``: the paired preference losses' adapter (ORPO, CPO, SimPO) and their upstream baselines.
- ``distillation``: the distillation losses' adapter (JSD, cosine).
- ``grpo``: the GRPO loss's adapter at either importance-sampling level.
- ``divergence``: the divergences' adapter (KL, JSD, TVD over the vocabulary).
- ``rowwise``: the adapter of an op over one input's rows (softmax, sparsemax, squared ReLU).
- ``rotary``: the rotary embeddings' adapter (RoPE, Llama 4 RoPE, Qwen2-VL M-RoPE).
- ``multi_token_attention``: multi-token attention's inputs, convolution and cost model, dense or sparse.
"""
