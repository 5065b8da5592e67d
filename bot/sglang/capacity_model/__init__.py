"""Predict what a flag change does to a target's capacity, from SGLang's own start arithmetic.

Why: a restart costs up to fifteen minutes, and most flags people try for capacity change it
only through SGLang's deterministic memory arithmetic, fed by figures the last start already
printed (free memory before the weights, the weights, the KV cell, the hybrid state per
request). The package is a pure function of those recorded figures, the start's printed
`server_args`, the change and the SGLang version: no store, no target, no clock, so a later
calibration store, a `try` preflight and a stored predicted-vs-measured can all call it.

Every figure comes back next to today's, as a band, with the steps that made it; each step
names the formula and the SGLang source (file, function, release) it follows. What the rules
read cannot decide is "unknown: needs a restart", never a guess. The releases read are 0.5.9,
0.5.10 (same rules to 0.5.13) and 0.5.23 (`pip download sglang==X --no-deps`); other releases
get "unknown". docs/commands.md "predict" lists what is modelled per flag.

One module per stage, each importing only the ones before it:
- `figures`: what a recorded start printed (`StartFigures`, `figures_json`) and the answer's
  shapes (`Band`, `Unknown`, `Step`);
- `applied_change`: a change applied to the start's `server_args`, with learned workspaces;
- `rules`: SGLang's per-release formulas, each citing its source;
- `arithmetic`: one run of the start arithmetic at one jitter, and calibration from a start;
- `prediction`: the run across the band, figures next to today's, expectations called.
"""
