"""Two-stage protocol sweeps: [protocol] select_seeds = S1 S2 ... (scripts/sweep_spec.py).

Stage one runs every setting at every value of the select key (the learning rate) for the
selection seeds; the report's rule (sweep_report_protocol.choose_learning_rates, validation
records only) then chooses each cell's rate, and stage two runs the other seeds at that rate
alone. A replicate costs one run instead of one per rate, and the choice still never reads a test
score. A stage-two point whose cell is not chosen yet waits for the cell's last selection run; one
whose rate was not chosen is not run ("not needed")."""
import time

import sweep_report_protocol as proto
import sweep_synth


def is_stage_two(spec, point):
    seeds = (spec.get("protocol") or {}).get("select_seeds")
    if not seeds:
        return False
    return point["settings"][[k for k in spec["grid"] if k.endswith(".seed")][0]] not in seeds


def row_of(point, load_state):
    state = load_state(point["dir"]) or {}
    done = state.get("done") and "tagging" in state.get("stages", {})
    return {"settings": point["settings"], "result": state["stages"]["tagging"] if done else None, "point": point}


def selection_points(spec, points, point):
    """The stage-one points of a point's cell."""
    cell = proto.cell_of(spec, {"settings": point["settings"]})
    return [p for p in points if not is_stage_two(spec, p) and proto.cell_of(spec, {"settings": p["settings"]}) == cell]


def needed(spec, points, point, load_state):
    """True (run it), False (its cell chose another rate) or None (the cell is not chosen yet) for
    a stage-two point; True for every other point."""
    if not is_stage_two(spec, point):
        return True
    cell = proto.cell_of(spec, {"settings": point["settings"]})
    rows = [row_of(p, load_state) for p in selection_points(spec, points, point)]
    chosen = proto.cell_choice(spec, rows, cell)
    if chosen is None:
        return None
    select = spec["protocol"]["select"]
    return point["settings"][select] == chosen


def wait_until_chosen(spec, points, point, load_state, stopping, failed, poll=2.0):
    """needed(), waiting while the point's cell is not chosen; None if the sweep is stopping;
    raises RuntimeError naming the selection run that failed (the cell cannot be chosen)."""
    while not stopping():
        answer = needed(spec, points, point, load_state)
        if answer is not None:
            return answer
        broken = [p["name"] for p in selection_points(spec, points, point) if p["name"] in failed]
        if broken:
            raise RuntimeError(f"its cell cannot choose a {spec['protocol']['select']}: the selection run "
                               f"{broken[0]} failed")
        time.sleep(poll)
    return None


def task_of(point):
    return point["settings"].get(sweep_synth.TASK_KEY)
