"""GRPO on repogym tasks with TRL 1.16 (``trl.experimental.harbor``), sandboxes on this machine.

    pip install 'trl==1.16.*' repogym        # plus torch/vLLM as usual for training
    python trl_grpo.py OUT/tasks Qwen/Qwen3-4B

``OUT`` is a folder ``repogym generate`` wrote (its ``tasks/`` holds one folder per task).
Each rollout starts a fresh repogym sandbox (``environment_type``: ``local`` needs no Docker
daemon; ``docker`` uses the engine), the model works through the ``bash``, ``read_file`` and
``write_file`` tools, and the reward is the task verifier's, run in repogym's clean room.
"""

import sys

from trl import GRPOConfig, GRPOTrainer
from trl.experimental.harbor import HarborSpec

tasks, model = sys.argv[1], sys.argv[2]
spec = HarborSpec(
    tasks,
    agent="repogym.integrations.trl:RepogymTRLEnv",
    environment_type="local",
)
args = GRPOConfig(
    output_dir="grpo-repogym",
    num_generations=8,
    per_device_train_batch_size=8,
    gradient_accumulation_steps=1,
    max_completion_length=8192,
    max_tool_calling_iterations=30,
    learning_rate=1e-6,
    max_steps=200,
    logging_steps=1,
)
trainer = GRPOTrainer(
    model=model,
    args=args,
    train_dataset=spec.train_dataset,
    environment_factory=spec.environment_factory,
    reward_funcs=spec.reward_funcs,
)
trainer.train()
