"""The operator guide's files and annotators (docs/operator-guide.md).

    python docs/examples/first_project.py files            # tasks.jsonl, gold.csv here
    python docs/examples/first_project.py annotate people.txt [API_URL]

`files` writes 200 tasks and 20 gold questions of a three-class sentiment project (the
last word of the text decides the class). `annotate` runs one thread per line of
people.txt (`handle token accuracy`), each labelling through the HTTP API until nothing
is left for it: right with probability `accuracy`, else a label drawn at random.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import urllib.error
import urllib.request

WORDS = {"neg": ["awful", "dull", "broken", "late"], "neu": ["fine", "ok", "average", "plain"],
         "pos": ["great", "lovely", "superb", "fast"]}
CLASS = {word: label for label, words in WORDS.items() for word in words}


def files(rng: random.Random) -> None:
    with open("tasks.jsonl", "w") as f:
        for i in range(1, 201):
            label = rng.choice(list(WORDS))
            f.write(json.dumps({"id": f"t{i}", "category": rng.choice(["books", "news"]),
                                "text": f"The item was {rng.choice(WORDS[label])}."}) + "\n")
    with open("gold.csv", "w") as f:
        f.write("id,category,answer,text\n")
        for i in range(1, 21):
            label = rng.choice(list(WORDS))
            f.write(f"g{i},{rng.choice(['books', 'news'])},{label},"
                    f"The service was {rng.choice(WORDS[label])}.\n")


def call(api: str, token: str, path: str, body: object = None) -> dict:
    request = urllib.request.Request(
        api + path, method="POST", data=json.dumps(body or {}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:  # e.g. 403 once paused
        return {"assignment": None, "message": json.load(exc).get("message")}


def annotate(api: str, handle: str, token: str, accuracy: float, rng: random.Random) -> None:
    got, n = call(api, token, "/assignments/next"), 0
    while got.get("assignment"):
        a = got["assignment"]
        truth = CLASS[a["payload"]["text"].rstrip(".").split()[-1]]
        label = truth if rng.random() < accuracy else rng.choice(a["labels"])
        answer = call(api, token, f"/assignments/{a['assignment_id']}/label?next=true",
                      {"label": label})
        got, n = answer.get("next") or answer, n + 1
    print(f"{handle}: {n} labels; {got.get('message')}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["files"]:
        files(random.Random(1))
    elif argv[:1] == ["annotate"] and len(argv) in (2, 3):
        api = (argv[2] if len(argv) == 3 else "http://127.0.0.1:8711") + "/api/v1"
        people = [line.split() for line in open(argv[1]) if line.strip()]
        threads = [threading.Thread(target=annotate,
                                    args=(api, h, t, float(acc), random.Random(i)))
                   for i, (h, t, acc) in enumerate(people)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
