"""The transformers reference pipeline that the runtime is compared with (test/benchmark side
only: this module imports torch and transformers, the runtime never does).

It is what a transformers user does with a Qwen2-VL checkpoint: ``AutoTokenizer`` +
``Qwen2VLImageProcessorPil`` + ``Qwen2VLProcessor``'s own ``__call__`` (text expansion of each
``<|image_pad|>`` to t*h*w/4 copies, tokenization, ``mm_token_type_ids``) +
``Qwen2VLForConditionalGeneration.generate``. ``AutoProcessor`` cannot be used here: it also
builds the video processor, which needs torchvision, and the only torchvision wheel for
torch 2.13 is a CUDA build that fails to load beside the CPU torch ("operator torchvision::nms
does not exist"). :class:`ImageOnlyProcessor` is Qwen2VLProcessor with the video attribute
removed from its signature, so the processor's real code runs unchanged for images.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
from PIL import Image
from transformers import (
    AutoTokenizer,
    Qwen2VLForConditionalGeneration,
    Qwen2VLImageProcessorPil,
    Qwen2VLProcessor,
)

from mmaas.pipelines.qwen2_vl.export.side_files import hf_messages


class ImageOnlyProcessor(Qwen2VLProcessor):
    """transformers' Qwen2VLProcessor without a video processor (see the module docstring).
    ``ProcessorMixin.get_attributes`` reads the modality attributes from ``__init__``'s
    signature, so leaving ``video_processor`` out of it is enough."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)


@dataclass
class Result:
    """One reference generation: prompt ids, new ids, decoded text, greedy margins."""

    prompt_ids: list[int]
    new_ids: list[int]
    text: str
    margins: list[float] = field(default_factory=list)  # top-1 minus top-2 processed score


class Reference:
    """Tokenizer, image processor, processor and model of one checkpoint folder."""

    def __init__(self, checkpoint: Path, num_threads: int | None = None, **loading: Any) -> None:
        """``loading``: from_pretrained's keywords (e.g. ``dtype=torch.bfloat16,
        attn_implementation="sdpa", device_map="cuda"``; none: FP32 on the CPU)."""
        if num_threads:
            torch.set_num_threads(num_threads)
        self.tokenizer = AutoTokenizer.from_pretrained(checkpoint)
        self.image_processor = Qwen2VLImageProcessorPil.from_pretrained(checkpoint)
        self.processor = ImageOnlyProcessor(
            self.image_processor, self.tokenizer, chat_template=self.tokenizer.chat_template
        )
        self.model = Qwen2VLForConditionalGeneration.from_pretrained(checkpoint, **loading).eval()

    def prompt(self, num_images: int, text: str) -> str:
        """The chat template's text for one user turn plus the generation prompt."""
        rendered = self.tokenizer.apply_chat_template(
            hf_messages([("user", (*[None] * num_images, text))]),
            tokenize=False,
            add_generation_prompt=True,
        )
        return cast(str, rendered)

    def inputs(self, images: list[Image.Image], text: str) -> dict:
        """The processor's tensors: input_ids, attention_mask, mm_token_type_ids,
        pixel_values, image_grid_thw (the last two only with images)."""
        return self.processor(
            text=[self.prompt(len(images), text)],
            images=images or None,
            return_tensors="pt",
        )

    @torch.no_grad()
    def generate(
        self, images: list[Image.Image], text: str, max_new_tokens: int = 32, **kwargs
    ) -> Result:
        """Greedy ``generate(do_sample=False)`` (unless kwargs say otherwise), with the
        processed scores kept to report the top-1/top-2 margin of every step."""
        inputs = self.inputs(images, text)
        out = self.model.generate(
            **inputs,
            max_new_tokens=max_new_tokens,
            do_sample=kwargs.pop("do_sample", False),
            output_scores=True,
            return_dict_in_generate=True,
            **kwargs,
        )
        prompt = inputs["input_ids"][0].tolist()
        new = out.sequences[0, len(prompt) :].tolist()
        margins = []
        for scores in out.scores:
            top = torch.topk(scores[0].float(), 2).values
            margins.append(float(top[0] - top[1]))
        text_out = cast(str, self.tokenizer.decode(new, skip_special_tokens=True))
        return Result(prompt, new, text_out, margins)
