"""Record blind annotators' labels in Label Studio, each as its own user with its own annotation.

usage: record_labels.py URL LEAD_TOKEN PROJECT_ID PACKS PRIVATE PART WHO [WHO ...]
WHO is a pack folder's letter (annotator-WHO), or FOLDER=WHO when the annotator's identity differs from its
pack folder's letter (round 2: a=d b=e c=f, three new sessions labelling packs made in folders a, b, c).
Tokens of the annotator accounts are kept in PRIVATE/tokens.json (made by sign-up through the invite link).
"""
import csv
import json
import secrets
import sys
from pathlib import Path

import httpx
from label_studio_sdk import LabelStudio

from patterncnn.core.labels import LABELS
from patterncnn.labelling.push import FROM_NAME, TO_NAME, UNCERTAIN, choice_result

url, lead, pid, packs, private, part, whos = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]), Path(sys.argv[5]), sys.argv[6], sys.argv[7:]
tokens_file = private / "tokens.json"
tokens = json.loads(tokens_file.read_text()) if tokens_file.exists() else {}


def sign_up(invite: str, email: str) -> str:
    with httpx.Client(follow_redirects=True, timeout=60) as s:
        s.get(invite)
        r = s.post(invite, data={"email": email, "password": secrets.token_hex(8),
                                 "csrfmiddlewaretoken": s.cookies.get("csrftoken")}, headers={"Referer": invite})
        r.raise_for_status()
        t = s.get(f"{url}/api/current-user/token")
        t.raise_for_status()
        return t.json()["token"]


boss = LabelStudio(base_url=url, api_key=lead)
task_of = {}
for t in boss.tasks.list(project=pid, fields="all"):
    task_of[t.data["map_id"]] = t.id
print(len(task_of), "tasks in project", pid)
for spec in whos:
    folder, _, who = spec.partition("=")
    who = who or folder
    email = f"annotator-{who}@patterncnn.local"
    if who not in tokens:
        invite = httpx.get(f"{url}/api/invite", headers={"Authorization": f"Token {lead}"}).json()
        link = invite.get("invite_url") or invite.get("invite_link")
        tokens[who] = sign_up(f"{url}{link}" if link.startswith("/") else link, email)
        tokens_file.write_text(json.dumps(tokens))
    me = LabelStudio(base_url=url, api_key=tokens[who])
    uid = me.users.whoami().id
    index = {r["n"]: r["id"] for r in json.loads((private / f"annotator-{folder}" / f"part-{part}" / "index.json").read_text())}
    rows = list(csv.DictReader(open(packs / f"annotator-{folder}" / f"part-{part}" / "labels.csv")))
    posted = skipped = 0
    existing = set()
    for t in boss.tasks.list(project=pid, fields="all"):
        for a in (t.annotations or []):
            if (a.get("completed_by") if isinstance(a, dict) else a.completed_by) == uid:
                existing.add(t.id)
    for r in rows:
        label = r["label"].strip()
        if label not in LABELS:
            raise SystemExit(f"{who} part {part} #{r['n']}: bad label {label!r}")
        tid = task_of[index[int(r["n"])]]
        if tid in existing:
            skipped += 1
            continue
        result = [choice_result(label, FROM_NAME, TO_NAME)]
        if str(r.get("uncertain", "")).strip() in ("1", "true", "yes"):
            result.append({"from_name": UNCERTAIN, "to_name": TO_NAME, "type": "choices", "value": {"choices": ["uncertain"]}})
        me.annotations.create(id=tid, result=result)
        posted += 1
    print(who, email, "user", uid, "posted", posted, "already there", skipped, "of", len(rows))
