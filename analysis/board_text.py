"""How a board screen reads in a page: signed deviations and z, each model's rule in words, a spread as a
percentage of its centre."""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpuatlas.analysis.boards import FALSE_ALARMS, GROUPS, is_group


def pct(v) -> str:
    return "" if pd.isna(v) else f"{v:+.2%}"


def z_text(v) -> str:
    return "" if pd.isna(v) else ("inf" if np.isinf(v) else f"{v:+.1f}")


RULE_TEXT = {"fleet": "against the median and MAD of its {boards} boards",
             "panel": "against its panel ({panel}; z is Student's t with the panel's boards less one degrees of "
                      "freedom)",
             "none": "not judged ({boards} boards, fewer than a verdict needs, and no panel)"}


def rule_line(summary: dict) -> str:
    """Which rule judged each model, and its thresholds."""
    rule = summary.get("screen", {})
    parts = []
    for gpu, m in rule.get("models", {}).items():
        text = f"{gpu}: " + RULE_TEXT[m["rule"]].format(**m)
        if "threshold" in m:
            text += (f": a quantity beyond |z| {m['threshold']:g} (or more where fewer boards measured it) and "
                     "outside the board's CI and repro interval")
        if "group_threshold" in m:
            text += f", a mechanism group ({', '.join(rule.get('groups', GROUPS))}) whose z is below " \
                    f"-{m['group_threshold']:g}"
        parts.append(text)
    return ("; ".join(parts) or "no board") + (f". Each screen (quantities, groups) holds a healthy summary's "
                                                f"false alarms to {rule.get('false_alarms', FALSE_ALARMS)}")


def spread_text(sigma, median, quantity) -> str:
    """σ over |centre| as a percentage; blank for a group (its centre is a z near 0) or a zero centre."""
    return "" if pd.isna(sigma) or pd.isna(median) or not median or is_group(quantity) else f"{sigma / abs(median):.2%}"
