"""The entry of the NCCL collectives' helper ranks, ``python -m gpuatlas.probes.collectives RANK RANKS ADDRESS``: the
family (probes/families/collectives.py) starts its helpers by this module name, which its version hashes, so
the name stays; the helpers' code is the family's."""
import sys

from gpuatlas.probes.families.collectives import _helper

if __name__ == "__main__":
    _helper(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
