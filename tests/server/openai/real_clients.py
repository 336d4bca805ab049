"""The real OpenAI clients against a server (run by their own venv, .venv-openai, made by
scripts/install_clients.sh): ``real_clients.py BASE_URL KEY PICTURE CONVERSATION`` prints
one JSON object with what each client got for the same greedy question about the picture,
and for CONVERSATION (JSON: system, user, assistant, user turns; the first user turn's
picture an http URL the server fetches): its answer, ``n`` choices, logprobs, penalties."""

import asyncio
import base64
import json
import os
import sys
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # no download of litellm's price list

import litellm
import openai
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

BASE, KEY, PICTURE, TALK = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
URL = "data:image/jpeg;base64," + base64.b64encode(Path(PICTURE).read_bytes()).decode()
PARTS = [{"type": "image_url", "image_url": {"url": URL}},
         {"type": "text", "text": "Describe this picture."}]  # fmt: skip
MESSAGES = [{"role": "user", "content": PARTS}]
ASK = {"model": "qwen-vl", "messages": MESSAGES, "max_tokens": 12, "temperature": 0}


def sdk_features(client):
    """A conversation with a fetched picture; n choices; logprobs unary and streamed."""
    talk = client.chat.completions.create(model="qwen-vl", messages=TALK, max_tokens=8)
    many = client.chat.completions.create(model="qwen-vl", messages=TALK, max_tokens=6, n=3,
                                          seed=5, temperature=1.0)  # fmt: skip
    asked = {"model": "qwen-vl", "messages": TALK, "max_tokens": 6, "logprobs": True,
             "top_logprobs": 2}  # fmt: skip
    scored = client.chat.completions.create(**asked)
    streamed = []
    for chunk in client.chat.completions.create(**asked, stream=True):
        for choice in chunk.choices:
            if choice.logprobs and choice.logprobs.content:
                streamed += [e.model_dump() for e in choice.logprobs.content]
    return {
        "talk": talk.choices[0].message.content, "talk_usage": talk.usage.model_dump(),
        "n": [[c.index, c.message.content] for c in many.choices],
        "n_usage": many.usage.completion_tokens,
        "logprobs": [e.model_dump() for e in scored.choices[0].logprobs.content],
        "streamed_logprobs": streamed,
        "penalised": client.chat.completions.create(
            model="qwen-vl", messages=TALK, max_tokens=8, presence_penalty=2.0,
            frequency_penalty=2.0).choices[0].message.content,
    }  # fmt: skip


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
        "n": {"n": 0},
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
    talk = [SystemMessage(TALK[0]["content"]), HumanMessage(content=TALK[1]["content"]),
            AIMessage(TALK[2]["content"]), HumanMessage(TALK[3]["content"])]  # fmt: skip
    scored = ChatOpenAI(base_url=BASE, api_key=KEY, model="qwen-vl", max_tokens=8,
                        max_retries=0, logprobs=True).invoke(talk)  # fmt: skip
    return {"text": answer.content, "streamed": streamed, "usage": answer.usage_metadata,
            "talk": scored.content,
            "talk_logprobs": len(scored.response_metadata["logprobs"]["content"])}  # fmt: skip


def lite():
    answer = litellm.completion(model="openai/qwen-vl", api_base=BASE, api_key=KEY,
                                messages=MESSAGES, max_tokens=12, temperature=0)  # fmt: skip
    talk = litellm.completion(model="openai/qwen-vl", api_base=BASE, api_key=KEY,
                              messages=TALK, max_tokens=8)  # fmt: skip
    return {"text": answer.choices[0].message.content,
            "prompt_tokens": answer.usage.prompt_tokens,
            "talk": talk.choices[0].message.content}  # fmt: skip


client = openai.OpenAI(base_url=BASE, api_key=KEY, max_retries=0)
print(json.dumps({
    "sync": sdk_sync(client), "stream": sdk_stream(client), "async": asyncio.run(sdk_async()),
    "raw": raw_statuses(client), "models": [m.id for m in client.models.list()],
    "langchain": langchain(), "litellm": lite(), "features": sdk_features(client),
}))  # fmt: skip
