"""What the LM-head loss adapters share: ORPO/CPO/SimPO's inputs and HF baselines, and every head's cost model."""
