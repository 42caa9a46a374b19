"""What the framework adapters' tests share: the framework, and a model to drive it.

A framework that is not installed skips its tests locally, never under CI=true
(`.ci/run` installs every adapter's extra)."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from partner_memory.service import MemoryService


def framework(module: str) -> ModuleType:
    if os.environ.get("CI") == "true":
        return importlib.import_module(module)
    return pytest.importorskip(module)


def said_to_model(body: dict[str, Any]) -> str:
    """Everything one chat-completions request showed the model, as one text."""
    return json.dumps(body.get("messages", []), ensure_ascii=False)


class Model:
    """Answers each request in turn, and keeps what each one showed the model."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        #: What each answer goes on to say, in turn (none: "answer N" alone).
        self.talk: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str:
        self.seen.append(said_to_model(body))
        answer = f"answer {len(self.seen)}"
        return f"{answer}. {self.talk[len(self.seen) % len(self.talk)]}" if self.talk else answer


def remembers_across_restarts_and_rolling(
    store_url: str, model: Model, ask: Callable[[MemoryService, str, str], str]
) -> None:
    """The scenario every adapter passes through its framework's runner: `ask(service,
    user, text)` runs one turn and returns the answer. Each turn shows the model what
    the user said before (after a restart: a new service on the same database; after
    rolling: the summary), never another user's, and nothing once it is forgotten."""
    with MemoryService.open(store_url) as service:
        assert ask(service, "user-7", "My cat is called Luna") == "answer 1"
        ask(service, "user-7", "What is my cat called?")
        assert "Luna" in model.seen[-1]
        assert "answer 1" in model.seen[-1]
        ask(service, "user-8", "What is my cat called?")
        assert "Luna" not in model.seen[-1]

    with MemoryService.open(store_url) as service:  # a restart
        ask(service, "user-7", "Remind me of her name")
        assert "Luna" in model.seen[-1]
        assert service.memory("user-7").roll_now(idle=True) is not None
        assert service.memory("user-7").window() == []
        ask(service, "user-7", "And her name again?")
        assert "dialog_history" in model.seen[-1]
        assert "Luna" in model.seen[-1]
        service.memory("user-7").forget_all()
        ask(service, "user-7", "What is my cat called?")
        assert "Luna" not in model.seen[-1]


#: (what the user tells, what is asked later, what the answer must show): 29 facts.
FACTS = [
    ("My dentist is Dr Okafor.", "Who is my dentist?", "Okafor"),
    ("My sister is called Ingrid.", "What is my sister called?", "Ingrid"),
    ("My cat is named Pumpernickel.", "What is my cat named?", "Pumpernickel"),
    ("I drive a blue Skoda Octavia.", "What car do I drive?", "Skoda"),
    ("I train at the Riverside gym on Tuesdays.", "Which gym do I train at?", "Riverside"),
    ("I am allergic to hazelnuts.", "What am I allergic to?", "hazelnuts"),
    ("My bank is Nordbank.", "Which bank do I use?", "Nordbank"),
    ("My birthday is on 14 March.", "When is my birthday?", "14 March"),
    ("My hometown is Tromsø.", "What is my hometown?", "Tromsø"),
    ("My favourite colour is teal.", "What is my favourite colour?", "teal"),
    ("My boss is named Kowalski.", "What is my boss named?", "Kowalski"),
    (
        "I am learning Portuguese at night school.",
        "What am I learning at night school?",
        "Portuguese",
    ),
    ("Our dog Biscuit is a beagle.", "What breed is our dog Biscuit?", "beagle"),
    ("My flat number is 42B.", "What is my flat number?", "42B"),
    ("I play the bassoon in an orchestra.", "What do I play in the orchestra?", "bassoon"),
    ("I take my coffee with oat milk.", "How do I take my coffee?", "oat milk"),
    ("I am reading a novel called The Salt Road.", "Which novel am I reading?", "Salt Road"),
    ("My doctor is Dr Haldane.", "Who is my doctor?", "Haldane"),
    ("I keep a lemon tree on the balcony.", "What tree do I keep on the balcony?", "lemon"),
    ("Next summer we travel to Kyoto.", "Where do we travel next summer?", "Kyoto"),
    ("I support the Rovers football team.", "Which football team do I support?", "Rovers"),
    ("My neighbour is called Mrs Abernathy.", "What is my neighbour called?", "Abernathy"),
    ("I work as a marine biologist.", "What do I work as?", "marine biologist"),
    ("My son Teo is seven years old.", "How old is my son Teo?", "seven"),
    ("My bike is a red Brompton.", "What bike do I ride?", "Brompton"),
    ("Our wedding anniversary is on 9 June.", "When is our wedding anniversary?", "9 June"),
    ("My favourite podcast is Deep Currents.", "What is my favourite podcast?", "Deep Currents"),
    ("I live on Juniper Street.", "Which street do I live on?", "Juniper"),
    ("My favourite tea is lapsang souchong.", "What is my favourite tea?", "lapsang"),
]
CHATTER = [
    "Thanks, that helps a lot.",
    "Nice weather today, isn't it?",
    "Ha, that is funny.",
    "Okay, sounds good.",
]
#: What an assistant says at length, as models do: names, places and numbers that
#: compete with the user's facts for a summary's few lines.
TALK = [
    "For a weekend in Lisbon, the Gulbenkian Museum opens at 10am, tram 28 is best"
    " before 9am, and Manteigaria on Rua do Loreto bakes pastel de nata all day."
    " Budget about 60 euros a day for food and transport.",
    "A good beginner routine is three sets of ten squats, push-ups and rows, twice a"
    " week, adding 2.5 kg every fortnight. Rest 90 seconds between sets and sleep at"
    " least seven hours.",
    "The Vienna Philharmonic plays the New Year's Concert every 1 January at the"
    " Musikverein; tickets are drawn by lottery in February, and about 40,000 people"
    " apply for 2,000 seats.",
    "To repot a fiddle-leaf fig, choose a pot 5 cm wider, water it two days before,"
    " loosen the roots gently and keep it out of direct sun for a week. Feed it"
    " monthly from April to September.",
    "Mount Fuji's climbing season runs from early July to 10 September; the Yoshida"
    " trail starts at the fifth station at 2,300 metres and most people reach the"
    " summit at 3,776 metres in six hours.",
    "Sourdough wants a starter fed 12 hours before, 75 % hydration, four sets of"
    " folds 30 minutes apart and a cold proof of 14 hours; bake at 250 degrees in a"
    " Dutch oven, lid on for 20 minutes.",
]
#: The share of questions whose fact must reach the model.
DELIVERED = 0.9


def delivers_the_facts(
    store_url: str,
    model: Model,
    ask: Callable[[MemoryService, str, str], str],
    *,
    repeats_recent: bool = False,
) -> None:
    """45 turns carrying 29 facts (16 of them small talk, every answer long and full of
    names and numbers, as a model's are), then a question about each fact, every turn
    through the framework's runner (`ask(service, user, text)`): the
    model's input holds the fact for at least 90 % of them, what recall added stays
    within its bounds, and recall never repeats what the recent messages hold (the
    last fact told is asked first), unless the adapter shows none (`repeats_recent`)
    or cannot tell which."""
    from partner_memory.integrations.binding import RECALLED_CHARS

    told = iter(FACTS)
    model.talk = TALK
    with MemoryService.open(store_url) as service:
        for turn in range(45):
            chatter = turn % 3 == 2 or turn == 0
            said = CHATTER[turn % len(CHATTER)] if chatter else next(told)[0]
            ask(service, "user-7", said)
        assert next(told, None) is None
        missed = []
        for number, (_, question, answer) in enumerate(FACTS[-1:] + FACTS[:-1]):
            ask(service, "user-7", question)
            seen = model.seen[-1]
            if number == 0 and not repeats_recent:  # the newest: in the recent messages
                block = seen.partition("<recalled_messages>")[2]
                assert FACTS[-1][0] not in block.partition("</recalled_messages>")[0]
            if answer not in seen:
                missed.append(question)
            if "<recalled_messages>" in seen:
                block = seen.split("<recalled_messages>")[1].split("</recalled_messages>")[0]
                assert len(block) <= RECALLED_CHARS + 200  # JSON escapes, the list marks
        assert len(missed) <= (1 - DELIVERED) * len(FACTS), missed
