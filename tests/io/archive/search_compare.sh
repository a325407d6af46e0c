# What must be equal between two runs of the same `plan` search (sourced by
# tests/io/archive/plan_resume.sh and bench/plan_resume.sh): the plan
# document without how the run was spread and its wall time, and the
# archive's plans, per-configuration rows without rank and seconds, totals
# without seconds, and the resume data.

# The plan document without "run" and the wall time.
plan_doc() {
  python3 -c 'import json,sys
d = json.load(open(sys.argv[1])); d.pop("run"); d["search"].pop("seconds")
print(json.dumps(d, indent=1, sort_keys=True))' "$1"
}
# The records of a compound table, one line each, without the fields
# numbered in $3 (0-based: who ran it, how long).
records() {
  h5dump -m %.17g -y -d "$2" "$1" | awk -v drop=",$3," \
    'BEGIN { n = -1 } /^ *\{ *$/ { n = 0; rec = ""; next }
     /^ *\},? *$/ { if (n >= 0) print rec; n = -1; next }
     n >= 0 { gsub(/[ ,]/, ""); if (index(drop, "," n ",") == 0) rec = rec " " $0; n++ }'
}
archive_text() {
  records "$1" /plans/plans ""
  records "$1" /plans/stages ""
  records "$1" /search/configs 8,22  # rank, seconds
  records "$1" /search/totals 11     # seconds
  records "$1" /search/resume/plans ""
  records "$1" /search/resume/stages ""
  records "$1" /search/resume/closest ""
  h5dump -a /search/proven_optimal -a /search/configs_not_searched "$1" | grep -v HDF5
}
