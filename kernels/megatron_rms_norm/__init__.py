"""RMSNorm in Megatron-LM's layout: x [seq, batch, hidden], normalized over hidden."""
