"""TagResource (ResourceArn, Tags), UntagResource (ResourceArn, TagKeys) and
ListTagsOfResource (ResourceArn, NextToken): what test_smallops.py (tags,
the 50-tag limit, reserved prefixes, characters) leaves out: the
constraints on keys and values, unknown and malformed ARNs."""
import re

from conformance import HASH, Case, constraint, main, uid


class Tags(Case):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.arn = cls.c.describe_table(TableName=HASH)["Table"]["TableArn"]

    def test_round_trip(self):
        k = "conf-" + uid()
        self.c.tag_resource(ResourceArn=self.arn, Tags=[{"Key": k, "Value": "v"}])
        tags = self.c.list_tags_of_resource(ResourceArn=self.arn)
        self.assertIn({"Key": k, "Value": "v"}, tags["Tags"])
        self.assertNotIn("NextToken", tags)
        self.c.untag_resource(ResourceArn=self.arn, TagKeys=[k])
        self.assertNotIn({"Key": k, "Value": "v"},
                         self.c.list_tags_of_resource(ResourceArn=self.arn)["Tags"])

    def test_errors(self):
        missing = self.arn.rsplit("/", 1)[0] + "/conf-absent-" + uid()
        for fn, kw in ((self.c.list_tags_of_resource, {}),
                       (self.c.tag_resource, {"Tags": [{"Key": "a", "Value": "b"}]}),
                       (self.c.untag_resource, {"TagKeys": ["a"]})):
            with self.subTest(op=fn.__name__):
                self.refused(fn, "ResourceNotFoundException", ResourceArn=missing, **kw)
                self.invalid(fn, "Invalid TableArn: Invalid ResourceArn provided as input "
                             "not-an-arn-at-all", ResourceArn="not-an-arn-at-all", **kw)
        # (Shoal abbreviates the long value in these two messages.)
        self.invalid(self.raw.tag_resource, re.compile(
            r"^1 validation error detected: Value 'k+(\.\.\.)?' at 'tags.1.member.key' failed "
            r"to satisfy constraint: Member must have length less than or equal to 128$"),
            ResourceArn=self.arn, Tags=[{"Key": "k" * 129, "Value": "v"}])
        self.invalid(self.raw.tag_resource, re.compile(
            r"^1 validation error detected: Value 'v+(\.\.\.)?' at 'tags.1.member.value' "
            r"failed to satisfy constraint: Member must have length less than or equal to "
            r"256$"), ResourceArn=self.arn, Tags=[{"Key": "k", "Value": "v" * 257}])

    def test_tag_value_required(self):
        self.invalid(self.raw.tag_resource, constraint("null", "tags.1.member.value",
                                                       "not be null"),
                     ResourceArn=self.arn, Tags=[{"Key": "conf-" + uid()}])


if __name__ == "__main__":
    main([__file__])
