#!/bin/sh
# generate.sh - regenerates the golden operand/result tables of this folder from AMD's
# Matrix Instruction Calculator ([CALC] in docs/research/issue15_emulator.md), run once:
#   git clone https://github.com/ROCm/amd_matrix_instruction_calculator   (commit 2ef9189)
#   sh generate.sh <that checkout>
# Each file <arch>_<dtype>_<A|B|D>.csv is the calculator's own output of
#   matrix_calculator.py -a <arch> -i v_{mfma,wmma}_f32_16x16x16_<dtype> -M -<A|B|D> --csv
# (one row per lane: which matrix element each register half holds), and each
# cdna3_32x32x8_<dtype>_<A|B|D>.csv that of v_mfma_f32_32x32x8_<dtype> on cdna3; cdna2_* are
# the same two shapes on cdna2 (gfx90a), whose names differ (v_mfma_f32_16x16x16f16,
# ..16bf16_1k, v_mfma_f32_32x32x8f16, ..8bf16_1k) and whose tables equal cdna3's. tabulate.py here
# stands in for the `tabulate` package, which only formats the table (no package index
# could be reached when they were made); the mapping equations do not go through it.
# The emulator's semantics (src/emu/fa_emu_isa.cpp) are written from the equations of the
# research note's section 2; the ISA tests check them against these tables.
set -e
calc=$1/matrix_calculator.py
here=$(cd "$(dirname "$0")" && pwd)
for row in cdna3:v_mfma rdna3:v_wmma rdna4:v_wmma; do
  arch=${row%%:*}
  for dtype in f16 bf16; do
    for m in A B D; do
      PYTHONPATH=$here python3 "$calc" -a "$arch" -i "${row#*:}_f32_16x16x16_$dtype" -M -$m --csv \
        > "$here/${arch}_${dtype}_$m.csv"
    done
  done
done
for dtype in f16 bf16; do
  for m in A B D; do
    PYTHONPATH=$here python3 "$calc" -a cdna3 -i "v_mfma_f32_32x32x8_$dtype" -M -$m --csv \
      > "$here/cdna3_32x32x8_${dtype}_$m.csv"
  done
done
for dtype in f16 bf16; do
  k=; [ "$dtype" = bf16 ] && k=_1k
  for m in A B D; do
    PYTHONPATH=$here python3 "$calc" -a cdna2 -i "v_mfma_f32_16x16x16$dtype$k" -M -$m --csv > "$here/cdna2_${dtype}_$m.csv"
    PYTHONPATH=$here python3 "$calc" -a cdna2 -i "v_mfma_f32_32x32x8$dtype$k" -M -$m --csv \
      > "$here/cdna2_32x32x8_${dtype}_$m.csv"
  done
done
