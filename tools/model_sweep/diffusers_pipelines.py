"""Two tiny diffusers pipelines run end to end by the sweep (tools/model_sweep/diffusers_worker.py): an unconditional
UNet with the DDPM scheduler, and a class-conditioned DiT with a KL autoencoder, classifier-free guidance and the DDIM
scheduler. Each is built from seed 0; a call draws its noise from a CPU generator of seed 0, so both devices denoise
the same latents, and returns the images as a float tensor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

STEPS = 2


def _images(out: Any) -> torch.Tensor:
    return torch.as_tensor(out.images).float()


def ddpm() -> Any:
    from diffusers import DDPMPipeline, DDPMScheduler, UNet2DModel

    torch.manual_seed(0)
    unet = UNet2DModel(
        sample_size=16,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=(32, 64),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
    )
    return DDPMPipeline(unet=unet.eval(), scheduler=DDPMScheduler(num_train_timesteps=100))


def ddpm_call(pipe: Any) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return _images(pipe(batch_size=2, generator=gen, num_inference_steps=STEPS, output_type="np"))


def dit() -> Any:
    from diffusers import AutoencoderKL, DDIMScheduler, DiTPipeline, DiTTransformer2DModel

    torch.manual_seed(0)
    transformer = DiTTransformer2DModel(
        num_attention_heads=2,
        attention_head_dim=16,
        in_channels=4,
        out_channels=8,
        num_layers=2,
        sample_size=8,
        patch_size=2,
        num_embeds_ada_norm=1000,  # the pipeline's unconditional label is 1000
    )
    vae = AutoencoderKL(
        block_out_channels=(32, 32),
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        latent_channels=4,
        layers_per_block=1,
    )
    # eval(), as from_pretrained leaves them: in training mode DiT drops class labels at random (drawn on each device)
    scheduler = DDIMScheduler(num_train_timesteps=100)
    return DiTPipeline(transformer=transformer.eval(), vae=vae.eval(), scheduler=scheduler)


def dit_call(pipe: Any) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    out = pipe(class_labels=[1, 3], generator=gen, num_inference_steps=STEPS, guidance_scale=4.0, output_type="np")
    return _images(out)


PIPELINES: dict[str, tuple[Callable[[], Any], Callable[[Any], torch.Tensor]]] = {
    "DDPMPipeline": (ddpm, ddpm_call),
    "DiTPipeline": (dit, dit_call),
}
