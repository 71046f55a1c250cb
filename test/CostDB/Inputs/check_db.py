"""Prints what a cost database holds, for the CostDB tests to check: the schema
version, the sources, how many measurements have energy, that every time is
positive, and the energy sensors named."""
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
print("schema", db.execute("PRAGMA user_version").fetchone()[0])
print("sources", " ".join(r[0] for r in db.execute("SELECT DISTINCT source FROM sources ORDER BY source")))
with_energy = db.execute("SELECT count(*) FROM measurements WHERE joules IS NOT NULL").fetchone()[0]
without = db.execute("SELECT count(*) FROM measurements WHERE joules IS NULL").fetchone()[0]
print("with energy", with_energy, "without", without)
print("every time positive", all(r[0] > 0 and r[1] <= r[0] <= r[2] for r in
                                 db.execute("SELECT median_s, q1_s, q3_s FROM measurements")))
sources = [r[0] for r in db.execute("SELECT DISTINCT energy_source FROM measurements "
                                    "WHERE energy_source IS NOT NULL")]
if sources:
    print("energy sources", ", ".join(sources))
