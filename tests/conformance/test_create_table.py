"""CreateTable: TableName, AttributeDefinitions, KeySchema,
LocalSecondaryIndexes, GlobalSecondaryIndexes, BillingMode,
StreamSpecification, TableClass, Tags; the TableDescription it answers;
errors ResourceInUseException and ValidationException.  (Provisioned
throughput and its errors are test_provisioned.py's; tags, deletion
protection, ARNs and index projections test_smallops.py's.)"""
import re

from conformance import HASH, Case, constraint, main, poll, uid

INVALID = "One or more parameter values were invalid: "


def attrs(*pairs):
    return [{"AttributeName": a, "AttributeType": t} for a, t in pairs]


def keys(*pairs):
    return [{"AttributeName": a, "KeyType": t} for a, t in pairs]


class CreateTable(Case):
    def bad(self, message, **kw):
        kw.setdefault("TableName", "conf-bad-" + uid())
        kw.setdefault("BillingMode", "PAY_PER_REQUEST")
        self.invalid(self.raw.create_table, message, **kw)
        if kw["TableName"].startswith("conf-bad-"):  # nothing was created
            self.refused(self.c.describe_table, "ResourceNotFoundException",
                         TableName=kw["TableName"])

    def test_description(self):
        name = "conf-ct-" + uid()
        d = self.c.create_table(
            TableName=name, BillingMode="PAY_PER_REQUEST", TableClass="STANDARD",
            AttributeDefinitions=attrs(("pk", "S"), ("sk", "B"), ("l", "N"), ("g", "S")),
            KeySchema=keys(("pk", "HASH"), ("sk", "RANGE")),
            LocalSecondaryIndexes=[{"IndexName": "byL", "KeySchema": keys(("pk", "HASH"),
                                                                           ("l", "RANGE")),
                                    "Projection": {"ProjectionType": "KEYS_ONLY"}}],
            GlobalSecondaryIndexes=[{"IndexName": "byG", "KeySchema": keys(("g", "HASH")),
                                     "Projection": {"ProjectionType": "INCLUDE",
                                                    "NonKeyAttributes": ["a", "b"]}}],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
            # Accepted and ignored: Shoal has no encryption at rest of its own.
            SSESpecification={"Enabled": False})
        t = d["TableDescription"]
        self.assertEqual(t["TableName"], name)
        self.assertIn(t["TableStatus"], ("CREATING", "ACTIVE"))
        self.assertEqual(t["KeySchema"], keys(("pk", "HASH"), ("sk", "RANGE")))
        self.assertEqual(sorted(a["AttributeName"] for a in t["AttributeDefinitions"]),
                         ["g", "l", "pk", "sk"])
        self.assertEqual(t["BillingModeSummary"]["BillingMode"], "PAY_PER_REQUEST")
        self.assertEqual(t["ItemCount"], 0)
        self.assertEqual(t["TableSizeBytes"], 0)
        self.assertRegex(t["TableId"], r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                                       r"[0-9a-f]{12}$")
        self.assertRegex(t["TableArn"], r"^arn:aws:dynamodb:[^:]+:\d{12}:table/" + name + "$")
        self.assertEqual(t["StreamSpecification"], {"StreamEnabled": True,
                                                    "StreamViewType": "KEYS_ONLY"})
        self.assertEqual(t["LatestStreamArn"], t["TableArn"] + "/stream/" + t["LatestStreamLabel"])
        lsi = t["LocalSecondaryIndexes"][0]
        self.assertEqual((lsi["IndexName"], lsi["IndexArn"], lsi["Projection"]),
                         ("byL", t["TableArn"] + "/index/byL", {"ProjectionType": "KEYS_ONLY"}))
        gsi = t["GlobalSecondaryIndexes"][0]
        self.assertEqual((gsi["IndexName"], gsi["IndexArn"], gsi["KeySchema"]),
                         ("byG", t["TableArn"] + "/index/byG", keys(("g", "HASH"))))
        self.assertEqual(gsi["Projection"], {"ProjectionType": "INCLUDE",
                                             "NonKeyAttributes": ["a", "b"]})
        self.assertIn(gsi["IndexStatus"], ("CREATING", "ACTIVE"))
        poll(lambda: self.c.describe_table(TableName=name)["Table"]["TableStatus"] == "ACTIVE")
        self.c.delete_table(TableName=name)

    def test_tags(self):
        name = "conf-ct-" + uid()
        d = self.c.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                                AttributeDefinitions=attrs(("pk", "S")),
                                KeySchema=keys(("pk", "HASH")),
                                Tags=[{"Key": "team", "Value": "conf"}, {"Key": "e", "Value": ""}])
        arn = d["TableDescription"]["TableArn"]
        tags = self.c.list_tags_of_resource(ResourceArn=arn)["Tags"]
        self.assertEqual(sorted((t["Key"], t["Value"]) for t in tags),
                         [("e", ""), ("team", "conf")])
        self.c.delete_table(TableName=name)
        self.bad(re.compile(r"aws: is reserved"),
                 AttributeDefinitions=attrs(("pk", "S")), KeySchema=keys(("pk", "HASH")),
                 Tags=[{"Key": "aws:x", "Value": "v"}])

    def test_existing_table(self):
        self.refused(self.c.create_table, "ResourceInUseException",
                     "Table already exists: " + HASH, TableName=HASH,
                     BillingMode="PAY_PER_REQUEST", AttributeDefinitions=attrs(("pk", "S")),
                     KeySchema=keys(("pk", "HASH")))

    def test_key_schema_errors(self):
        self.bad(INVALID + "Some index key attributes are not defined in AttributeDefinitions. "
                 "Keys: [pk], AttributeDefinitions: [x]",
                 AttributeDefinitions=attrs(("x", "S")), KeySchema=keys(("pk", "HASH")))
        self.bad(INVALID + "Number of attributes in KeySchema does not exactly match number of "
                 "attributes defined in AttributeDefinitions",
                 AttributeDefinitions=attrs(("pk", "S"), ("x", "S")),
                 KeySchema=keys(("pk", "HASH")))
        self.bad("Invalid KeySchema: The first KeySchemaElement is not a HASH key type",
                 AttributeDefinitions=attrs(("pk", "S"), ("sk", "S")),
                 KeySchema=keys(("pk", "RANGE"), ("sk", "HASH")))
        self.bad("Invalid KeySchema: The second KeySchemaElement is not a RANGE key type",
                 AttributeDefinitions=attrs(("pk", "S"), ("sk", "S")),
                 KeySchema=keys(("pk", "HASH"), ("sk", "HASH")))
        self.bad("Invalid KeySchema: Some index key attribute have no definition",
                 AttributeDefinitions=attrs(("pk", "S")),
                 KeySchema=keys(("pk", "HASH"), ("sk", "RANGE")))
        self.bad("Both the Hash Key and the Range Key element in the KeySchema have the same "
                 "name", AttributeDefinitions=attrs(("pk", "S"), ("sk", "S")),
                 KeySchema=keys(("pk", "HASH"), ("pk", "RANGE")))
        self.bad(None, AttributeDefinitions=attrs(("pk", "S")), KeySchema=[])
        self.bad(re.compile(r"^1 validation error detected: Value '.*' at 'keySchema' failed to "
                            r"satisfy constraint: Member must have length less than or equal "
                            r"to 2$"),
                 AttributeDefinitions=attrs(("a", "S"), ("b", "S"), ("c", "S")),
                 KeySchema=keys(("a", "HASH"), ("b", "RANGE"), ("c", "RANGE")))
        self.bad(constraint("'BOOL'", "attributeDefinitions.1.member.attributeType",
                            "satisfy enum value set: [B, N, S]"),
                 AttributeDefinitions=attrs(("pk", "BOOL")), KeySchema=keys(("pk", "HASH")))
        self.bad(constraint("'PRIMARY'", "keySchema.1.member.keyType",
                            "satisfy enum value set: [HASH, RANGE]"),
                 AttributeDefinitions=attrs(("pk", "S")), KeySchema=keys(("pk", "PRIMARY")))

    def test_table_name_errors(self):
        # DynamoDB's model now takes a table ARN here (1..1024 characters),
        # so the length is the service's own check, in its own words.
        length = "TableName must be at least 3 characters long and at most 255 characters long"
        for name, msg in (("ab", length), ("x" * 256, length),
                          ("bad name", constraint("'bad name'", "tableName",
                                                  "satisfy regular expression pattern: "
                                                  "[a-zA-Z0-9_.-]+"))):
            with self.subTest(name=name[:10]):
                self.bad(msg, TableName=name, AttributeDefinitions=attrs(("pk", "S")),
                         KeySchema=keys(("pk", "HASH")))

    def test_index_errors(self):
        base = {"AttributeDefinitions": attrs(("pk", "S"), ("sk", "S"), ("a", "S")),
                "KeySchema": keys(("pk", "HASH"), ("sk", "RANGE"))}
        proj = {"ProjectionType": "ALL"}
        self.bad(INVALID + "Table KeySchema does not have a range key, which is required when "
                 "specifying a LocalSecondaryIndex",
                 AttributeDefinitions=attrs(("pk", "S"), ("a", "S")),
                 KeySchema=keys(("pk", "HASH")),
                 LocalSecondaryIndexes=[{"IndexName": "idx", "Projection": proj,
                                         "KeySchema": keys(("pk", "HASH"), ("a", "RANGE"))}])
        self.bad(INVALID + "Index KeySchema does not have the same leading hash key as table "
                 "KeySchema for index: idx. index hash key: a, table hash key: pk",
                 LocalSecondaryIndexes=[{"IndexName": "idx", "Projection": proj,
                                         "KeySchema": keys(("a", "HASH"), ("sk", "RANGE"))}],
                 **base)
        self.bad(INVALID + "Duplicate index name: idx",
                 GlobalSecondaryIndexes=[{"IndexName": "idx", "Projection": proj,
                                          "KeySchema": keys(("a", "HASH"))}] * 2, **base)
        self.bad(INVALID + "Some index key attributes are not defined in AttributeDefinitions. "
                 "Keys: [zz], AttributeDefinitions: [pk, sk, a]",
                 GlobalSecondaryIndexes=[{"IndexName": "idx", "Projection": proj,
                                          "KeySchema": keys(("zz", "HASH"))}], **base)
        self.bad(constraint("'x'", "globalSecondaryIndexes.1.member.indexName",
                            "have length greater than or equal to 3"),
                 GlobalSecondaryIndexes=[{"IndexName": "x", "Projection": proj,
                                          "KeySchema": keys(("a", "HASH"))}], **base)

    def test_stream_specification_errors(self):
        base = {"AttributeDefinitions": attrs(("pk", "S")), "KeySchema": keys(("pk", "HASH"))}
        self.bad(re.compile(r"StreamViewType"),
                 StreamSpecification={"StreamEnabled": True}, **base)
        self.bad(constraint("'ALL'", "streamSpecification.streamViewType",
                            "satisfy enum value set: [NEW_IMAGE, OLD_IMAGE, NEW_AND_OLD_IMAGES, "
                            "KEYS_ONLY]"),
                 StreamSpecification={"StreamEnabled": True, "StreamViewType": "ALL"}, **base)


if __name__ == "__main__":
    main([__file__])
