"""Tests of derive: attribution, PyTorch ops, FLOPs, CUDA graphs, memory."""
