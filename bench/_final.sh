bash bench/device_run.sh tests 2>&1 | tail -4
bash bench/device_run.sh sanitize 2>&1 | tail -3
bash bench/sass_facts.sh .carry/libflashattn.so > $OUT/sass_facts.md 2>&1; cat $OUT/sass_facts.md
bash bench/device_run.sh bench > /dev/null 2>&1; cat $OUT/bench.txt
