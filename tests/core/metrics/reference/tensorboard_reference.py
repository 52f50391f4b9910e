#!/usr/bin/env python3
"""Reads a TensorBoard log directory with the tensorboard package and prints
every scalar as JSON: {"files": N, "scalars": {tag: [[step, value, wall_time], ...]}}.
Non-finite values are printed as the strings "nan", "inf", "-inf".

Usage: tensorboard_reference.py LOGDIR
"""
import glob
import json
import math
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def jsonable(value):
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def main(logdir):
    files = glob.glob(os.path.join(logdir, "*tfevents*"))
    accumulator = EventAccumulator(logdir, size_guidance={"scalars": 0})
    accumulator.Reload()
    scalars = {}
    for tag in accumulator.Tags()["scalars"]:
        scalars[tag] = [[event.step, jsonable(event.value), event.wall_time] for event in accumulator.Scalars(tag)]
    print(json.dumps({"files": len(files), "file_version": accumulator.file_version, "scalars": scalars}))


if __name__ == "__main__":
    main(sys.argv[1])
