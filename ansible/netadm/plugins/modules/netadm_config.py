#!/usr/bin/python
# -*- coding: utf-8 -*-
"""netadm_config: a host's netadm configuration as desired state."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: netadm_config
short_description: Make a host's netadm configuration the one given
version_added: "0.1.0"
author: netadm developers
description:
  - >-
    Sends the desired configuration (the C(links.toml) schema of netadm,
    with sections C(phys), C(aggr), C(vnic), C(interface) and C(address))
    to netadmd as one C(netadm apply), which validates it whole, plans it,
    runs it as one operation, reads it back and puts everything back if any
    step fails.
  - >-
    C(changed) comes from the plan; a configuration that is already the
    host's changes nothing.
  - >-
    Check mode runs C(netadm apply --dry-run); the plan (each step with its
    cost) is the diff.
  - >-
    With I(confirm_timeout), netadmd rolls back by itself unless a later
    task with I(state=confirmed) reaches the host in time.
requirements:
  - netadm (the netadm Debian package, or netadm on PATH) and a running netadmd
options:
  config:
    description:
      - >-
        The desired configuration, as C(netadm show-config) prints it (as a
        mapping). C(version) defaults to 1. Property values may be given as
        numbers or booleans (C(true) is C(on)).
      - Required with I(state=present).
    type: dict
  state:
    description:
      - >-
        C(present) applies I(config); C(confirmed) keeps what an apply with
        I(confirm_timeout) made; C(rolled_back) puts back the checkpoint now.
    type: str
    choices: [present, confirmed, rolled_back]
    default: present
  confirm_timeout:
    description:
      - Seconds after which netadmd rolls back unless confirmed; 0 arms nothing.
    type: int
    default: 0
  bus:
    description:
      - The D-Bus address netadmd serves on (default C($NETADM_BUS), else the system bus).
    type: str
  netadm:
    description:
      - The netadm command.
    type: str
    default: netadm
notes:
  - Supports check mode (the plan, changing nothing) and diff mode (the plan as text).
seealso:
  - name: netadm(8)
    description: The command this module runs (C(netadm apply), C(confirm), C(rollback)).
    link: https://example.invalid/netadm
"""

EXAMPLES = r"""
- name: Two VNICs over an aggregation, one with an address
  netadm.netadm.netadm_config:
    confirm_timeout: 60
    config:
      aggr:
        aggr0: {ports: [i40e0, i40e1]}
      vnic:
        web0: {over: aggr0, mac: "2:8:20:0:0:1", mac_mode: fixed, props: {mtu: 1400}}
      interface:
        web0: {}
      address:
        web0/v4: {addr: 192.0.2.10/24}
- name: Still reachable, so keep it
  netadm.netadm.netadm_config:
    state: confirmed
"""

RETURN = r"""
changed:
  description: Whether the configuration changed (in check mode, whether it would change).
  type: bool
  returned: always
  sample: true
plan:
  description: >-
    The plan's steps in the order the operation runs them, each with its
    C(kind) (config, rings, kernel or persist), C(object), C(action) and
    C(cost) (rings stopped, started and restarted, kernel changes).
  type: list
  elements: dict
  returned: state=present
  sample:
    - kind: config
      object: vnic web0
      action: create over aggr0
      cost: {rings_stopped: 0, rings_started: 0, rings_restarted: 0, kernel_changes: 0}
confirm_deadline_ms:
  description: When the armed checkpoint rolls back unless confirmed (ms since the Unix epoch).
  type: int
  returned: when a checkpoint was armed
  sample: 1798675200000
result:
  description: >-
    What C(netadm confirm) or C(netadm rollback) did, as its C(--json)
    prints it (C(op), C(object), C(timing), C(counts), C(notes)).
  type: dict
  returned: state=confirmed or state=rolled_back, when there was a checkpoint
error_kind:
  description: >-
    On failure, the kind of netadmd's error (C(NotFound), C(Busy),
    C(InvalidValue), ...), beside C(msg), which names what was wrong.
  type: str
  returned: failure
  sample: InvalidArgument
"""

import json

from ansible.module_utils.basic import AnsibleModule


def _props(value):
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _document(config):
    doc = dict(config or {})
    doc.setdefault("version", 1)
    for section in ("phys", "aggr", "vnic"):
        for entry in (doc.get(section) or {}).values():
            if isinstance(entry, dict) and isinstance(entry.get("props"), dict):
                entry["props"] = dict((k, _props(v)) for k, v in entry["props"].items())
    for section in ("interface",):
        for name, entry in list((doc.get(section) or {}).items()):
            if entry is None:
                doc[section][name] = {}
    return doc


def _plan_text(plan):
    lines = []
    for i, step in enumerate(plan, 1):
        cost = step.get("cost", {})
        parts = []
        for key, word in (
            ("rings_stopped", "rings stopped"),
            ("rings_started", "rings started"),
            ("rings_restarted", "rings restarted"),
            ("kernel_changes", "kernel changes"),
        ):
            if cost.get(key):
                parts.append("%d %s" % (cost[key], word))
        tail = "  [%s]" % ", ".join(parts) if parts else ""
        lines.append("%3d. %-7s %s  %s%s" % (i, step["kind"], step["object"], step["action"], tail))
    return "\n".join(lines) + ("\n" if lines else "")


def _run(module, args, data=None):
    cmd = [module.params["netadm"]]
    if module.params["bus"]:
        cmd += ["--bus", module.params["bus"]]
    cmd += ["--json"] + args
    rc, out, err = module.run_command(cmd, data=data, binary_data=True)
    if rc == 0:
        return json.loads(out) if out.strip() else {}, None
    try:
        e = json.loads(err)["error"]
    except (ValueError, KeyError, TypeError):
        e = {"kind": "Unknown", "message": err.strip() or out.strip()}
    return None, e


def main():
    module = AnsibleModule(
        argument_spec=dict(
            config=dict(type="dict"),
            state=dict(type="str", default="present", choices=["present", "confirmed", "rolled_back"]),
            confirm_timeout=dict(type="int", default=0),
            bus=dict(type="str"),
            netadm=dict(type="str", default="netadm"),
        ),
        required_if=[("state", "present", ["config"])],
        supports_check_mode=True,
    )
    state = module.params["state"]
    if state != "present":
        if module.check_mode:
            module.exit_json(changed=False)
        verb = "confirm" if state == "confirmed" else "rollback"
        res, err = _run(module, [verb])
        if err is None:
            module.exit_json(changed=True, result=res)
        if err["kind"] == "NotFound":
            module.exit_json(changed=False, msg=err["message"])
        module.fail_json(msg=err["message"], error_kind=err["kind"])

    args = ["apply", "-f", "-"]
    if module.check_mode:
        args.append("--dry-run")
    elif module.params["confirm_timeout"] > 0:
        args += ["--confirm-timeout", str(module.params["confirm_timeout"])]
    document = json.dumps(_document(module.params["config"]), sort_keys=True)
    res, err = _run(module, args, data=document)
    if err is not None:
        module.fail_json(msg=err["message"], error_kind=err["kind"], changed=False)
    plan = res.get("plan", [])
    out = dict(changed=bool(res.get("changed")), plan=plan)
    if res.get("confirm_deadline_ms"):
        out["confirm_deadline_ms"] = res["confirm_deadline_ms"]
    if module._diff and plan:
        out["diff"] = dict(prepared=_plan_text(plan))
    module.exit_json(**out)


if __name__ == "__main__":
    main()
