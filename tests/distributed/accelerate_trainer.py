"""A Hugging Face `Trainer` script, run by tests/distributed/test_accelerate.py under `accelerate launch` (and alone).

Every step sees the whole dataset (8 sequences): 4 per process under two processes, 8 in one, so DDP's averaged
gradient is the single-process one and the trained weights must agree. Rank 0 writes what it saw and the weights.

usage: accelerate_trainer.py OUT.pt BATCH_PER_DEVICE [cpu]
"""

from __future__ import annotations

import sys

import torch
from torch.utils.data import Dataset
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments


class Tokens(Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(0, 64, (8, 12), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main(out: str, per_device: int, use_cpu: bool) -> None:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32, tie_word_embeddings=True,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    args = TrainingArguments(
        output_dir=out + ".trainer",
        per_device_train_batch_size=per_device,
        num_train_epochs=3,
        learning_rate=1e-2,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
        use_cpu=use_cpu,
        seed=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=Tokens())
    trainer.train()
    state = trainer.accelerator.state
    if state.process_index == 0:
        torch.save(
            {
                "device": str(args.device),
                "distributed_type": str(state.distributed_type),
                "backend": state.backend,
                "num_processes": state.num_processes,
                "parallel_mode": str(args.parallel_mode),
                "ddp": isinstance(trainer.model_wrapped, torch.nn.parallel.DistributedDataParallel),
                "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
                "weights": {k: v.detach().cpu() for k, v in trainer.model.state_dict().items()},
            },
            out,
        )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:] == ["cpu"])
