"""ListTables: Limit, ExclusiveStartTableName; LastEvaluatedTableName; the
names in order; errors ValidationException."""
from conformance import HASH, NUMKEY, RANGE, STREAM, Case, constraint, main


class ListTables(Case):
    def test_pages(self):
        names = []
        start = None
        while True:
            r = self.c.list_tables(Limit=2, **({"ExclusiveStartTableName": start} if start else {}))
            self.assertLessEqual(len(r["TableNames"]), 2)
            names += r["TableNames"]
            start = r.get("LastEvaluatedTableName")
            if not start:
                break
            self.assertEqual(start, r["TableNames"][-1])
        self.assertEqual(names, sorted(names))
        self.assertEqual(len(names), len(set(names)))
        for t in (HASH, RANGE, NUMKEY, STREAM):
            self.assertIn(t, names)
        # A start name that is not a table starts after where it would be.
        r = self.c.list_tables(ExclusiveStartTableName=HASH[:-1], Limit=100)
        self.assertEqual(r["TableNames"][0], HASH)

    def test_limits(self):
        self.invalid(self.raw.list_tables, constraint("'0'", "limit",
                                                      "have value greater than or equal to 1"),
                     Limit=0)
        self.invalid(self.raw.list_tables, constraint("'101'", "limit",
                                                      "have value less than or equal to 100"),
                     Limit=101)
        self.invalid(self.raw.list_tables, constraint("'ab'", "exclusiveStartTableName",
                                                      "have length greater than or equal to 3"),
                     ExclusiveStartTableName="ab")


if __name__ == "__main__":
    main([__file__])
