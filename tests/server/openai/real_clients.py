"""The real OpenAI clients against a server (run by their own venv, .venv-openai, made by
scripts/install_clients.sh): ``real_clients.py BASE_URL KEY PICTURE`` prints one JSON
object with what each client got for the same greedy question about the picture."""

import asyncio
import base64
import json
import os
import sys
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # no download of litellm's price list

import litellm
import openai
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI

BASE, KEY, PICTURE = sys.argv[1], sys.argv[2], sys.argv[3]
URL = "data:image/jpeg;base64," + base64.b64encode(Path(PICTURE).read_bytes()).decode()
PARTS = [{"type": "text", "text": "Describe this picture."},
         {"type": "image_url", "image_url": {"url": URL}}]  # fmt: skip
MESSAGES = [{"role": "user", "content": PARTS}]
ASK = {"model": "qwen-vl", "messages": MESSAGES, "max_tokens": 12, "temperature": 0}


def sdk_sync(client):
    answer = client.chat.completions.create(**ASK)
    return {"text": answer.choices[0].message.content, "finish": answer.choices[0].finish_reason,
            "usage": answer.usage.model_dump()}  # fmt: skip


def sdk_stream(client):
    pieces, reasons, usage = [], [], None
    stream = client.chat.completions.create(**ASK, stream=True,
                                            stream_options={"include_usage": True})  # fmt: skip
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage.model_dump()
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            reasons.append(choice.finish_reason)
    return {"text": "".join(pieces), "reasons": [r for r in reasons if r], "usage": usage}


async def sdk_async():
    client = openai.AsyncOpenAI(base_url=BASE, api_key=KEY, max_retries=0)
    answer = await client.chat.completions.create(**ASK)
    await client.close()
    return answer.choices[0].message.content


def raw_statuses(client):
    """with_raw_response: the status of a good request and of client mistakes."""
    out = {}
    good = client.chat.completions.with_raw_response.create(**ASK)
    out["good"] = good.status_code
    for name, extra in {
        "n": {"n": 2},
        "bad_picture": {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}
                    ],
                }
            ]
        },
    }.items():
        try:
            client.chat.completions.with_raw_response.create(**{**ASK, **extra})
        except openai.APIStatusError as exc:
            out[name] = [exc.status_code, exc.body.get("param") if exc.body else None]
    try:
        openai.OpenAI(base_url=BASE, api_key="wrong", max_retries=0).models.list()
    except openai.AuthenticationError as exc:
        out["wrong_key"] = exc.status_code
    return out


def langchain():
    chat = ChatOpenAI(base_url=BASE, api_key=KEY, model="qwen-vl", temperature=0,
                      max_tokens=12, max_retries=0)  # fmt: skip
    answer = chat.invoke([HumanMessage(content=PARTS)])
    streamed = "".join(chunk.content for chunk in chat.stream([HumanMessage(content=PARTS)]))
    return {"text": answer.content, "streamed": streamed,
            "usage": answer.usage_metadata}  # fmt: skip


def lite():
    answer = litellm.completion(model="openai/qwen-vl", api_base=BASE, api_key=KEY,
                                messages=MESSAGES, max_tokens=12, temperature=0)  # fmt: skip
    return {"text": answer.choices[0].message.content,
            "prompt_tokens": answer.usage.prompt_tokens}  # fmt: skip


client = openai.OpenAI(base_url=BASE, api_key=KEY, max_retries=0)
print(json.dumps({
    "sync": sdk_sync(client), "stream": sdk_stream(client), "async": asyncio.run(sdk_async()),
    "raw": raw_statuses(client), "models": [m.id for m in client.models.list()],
    "langchain": langchain(), "litellm": lite(),
}))  # fmt: skip
