"""The flagbot lab: everything that stands in for the user's world, never shipped with the product.

* `twin`: an SGLang stand-in that follows SGLang's released sources (startup lines, server_args,
  capacity, `/health`, `/server_info`, bench_serving), installed into test nodes;
* `testbed`: real systemd + journald + sshd + sudo nodes in systemd-nspawn on this machine;
* `standin`: a local Slack (signed requests in, Web API and Socket Mode out, a page to read);
* `demo`: the seeds' incident played end to end on all three.

It depends on the product package `bot`; `bot` never imports it (an import-linter contract).
Its commands (`flagbot twin …`, `flagbot demo`) reach the product CLI through the
`flagbot.commands` entry point (`flagbot_lab.plugin:register`).
"""
