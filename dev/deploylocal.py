#!/usr/bin/env python3
"""Deploy template.yaml on an emulator's CloudFormation, as sam deploy would.

The SAM template is translated to CloudFormation by AWS's own SAM translator
(the library sam deploy and CloudFormation's transform use), with each
function's CodeUri pointing at a zip of its bootstrap uploaded to the
emulator's S3, and the stack is created on the emulator's CloudFormation
(moto). What the stack made is then described, as JSON on stdout, for
dev/deploylocal to check and to run the functions against.

Two adjustments are made to the translated template, here and never in
template.yaml, because moto's CloudFormation cannot take them as they are:
the REST API gets a Name (CloudFormation takes it from the definition's title;
moto requires the property), and the API's Deployment and Stage are left out
(moto's CloudFormation cannot deploy a REST API). Resource types moto does not
implement are skipped by moto itself; they are listed as "unchecked".

Usage: python3 dev/deploylocal.py --endpoint http://127.0.0.1:PORT \\
           --code SlavesFunction=bin/deploy-local/SlavesFunction/bootstrap ... \\
           [--template template.yaml] [--samconfig samconfig.toml] [--stack NAME] \\
           [--parameter Name=Value ...]

Stack parameters are samconfig.toml's parameter_overrides, then --parameter.
"""

import argparse
import ast
import io
import json
import os
import sys
import time
import tomllib
import zipfile

try:
    import boto3
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse
except ImportError as err:
    sys.exit(f"deploylocal: {err}; install it with: python3 -m pip install aws-sam-translator")

REGION = "us-east-1"
BUCKET = "fleet-deploy-local"
UNDEPLOYABLE = {"AWS::ApiGateway::Deployment", "AWS::ApiGateway::Stage"}


class NoManagedPolicies:
    """The translator asks IAM for AWS managed policy ARNs only when a function
    names one by its name; this template names none."""

    def load(self):
        return {}


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--template", default="template.yaml")
    p.add_argument("--samconfig", default="samconfig.toml")
    p.add_argument("--stack")
    p.add_argument("--code", action="append", default=[], help="Function=path of its bootstrap")
    p.add_argument("--parameter", action="append", default=[], help="Name=Value")
    return p.parse_args()


def pairs(items):
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep:
            sys.exit(f"deploylocal: {item!r} is not Name=Value")
        out[k] = v
    return out


def policy_document(doc):
    """A role policy's document as a dict: moto hands back the document it
    was given as CloudFormation passed it, a dict's text."""
    if isinstance(doc, str):
        try:
            return json.loads(doc)
        except ValueError:
            return ast.literal_eval(doc)
    return doc


def main():
    args = parse_args()
    clients = dict(endpoint_url=args.endpoint, region_name=REGION,
                   aws_access_key_id="test", aws_secret_access_key="test")
    s3 = boto3.client("s3", **clients)
    cfn = boto3.client("cloudformation", **clients)
    lam = boto3.client("lambda", **clients)
    iam = boto3.client("iam", **clients)
    events = boto3.client("events", **clients)
    dynamodb = boto3.client("dynamodb", **clients)

    with open(args.samconfig, "rb") as f:
        samconfig = tomllib.load(f).get("default", {})
    stack = args.stack or samconfig.get("global", {}).get("parameters", {}).get("stack_name", "fleet")
    overrides = samconfig.get("deploy", {}).get("parameters", {}).get("parameter_overrides", [])
    if isinstance(overrides, str):
        overrides = overrides.split()
    params = pairs(overrides)
    params.update(pairs(args.parameter))

    # The code, as sam package uploads it: one zip per function.
    s3.create_bucket(Bucket=BUCKET)
    code = pairs(args.code)
    for function, path in code.items():
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            info = zipfile.ZipInfo("bootstrap")
            info.external_attr = 0o755 << 16
            with open(path, "rb") as f:
                z.writestr(info, f.read())
        s3.put_object(Bucket=BUCKET, Key=f"{function}.zip", Body=buf.getvalue())

    with open(args.template) as f:
        sam = yaml_parse(f.read())
    sam.get("Globals", {}).get("Function", {}).pop("CodeUri", None)
    for logical_id, resource in sam["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function":
            if logical_id not in code:
                sys.exit(f"deploylocal: no --code for {logical_id}")
            resource.setdefault("Properties", {})["CodeUri"] = f"s3://{BUCKET}/{logical_id}.zip"
    translated = transform(sam, dict(params), NoManagedPolicies())

    # The harness's adjustments (see the module's comment).
    adjusted = []
    resources = translated["Resources"]
    for logical_id, resource in list(resources.items()):
        if resource["Type"] in UNDEPLOYABLE:
            del resources[logical_id]
            adjusted.append(f"{logical_id} ({resource['Type']}) left out")
        elif resource["Type"] == "AWS::ApiGateway::RestApi" and "Name" not in resource.get("Properties", {}):
            resource["Properties"]["Name"] = stack
            adjusted.append(f"{logical_id} named {stack}")
    for resource in resources.values():
        deps = resource.get("DependsOn")
        if isinstance(deps, str):
            deps = [deps]
        if deps:
            resource["DependsOn"] = [d for d in deps if d in resources]

    started = time.time()
    cfn.create_stack(
        StackName=stack,
        TemplateBody=json.dumps(translated),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in params.items()],
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"],
    )
    while True:
        desc = cfn.describe_stacks(StackName=stack)["Stacks"][0]
        if not desc["StackStatus"].endswith("IN_PROGRESS"):
            break
        if time.time() - started > 120:
            sys.exit(f"deploylocal: stack {stack} still {desc['StackStatus']} after 120 s")
        time.sleep(0.2)

    out = {
        "stack": stack,
        "status": desc["StackStatus"],
        "reason": desc.get("StackStatusReason", ""),
        "seconds": round(time.time() - started, 1),
        "parameters": params,
        "adjusted": adjusted,
        "outputs": {o["OutputKey"]: o["OutputValue"] for o in desc.get("Outputs", [])},
        "resources": {},
        "unchecked": {},
        "functions": {},
        "tables": {},
        "rules": {},
        "buses": [],
    }
    if desc["StackStatus"] != "CREATE_COMPLETE":
        json.dump(out, sys.stdout, indent=1)
        return

    created = {}
    for r in cfn.describe_stack_resources(StackName=stack)["StackResources"]:
        # moto lists the resources it skipped without a logical id.
        if "LogicalResourceId" in r:
            created[r["LogicalResourceId"]] = {"type": r["ResourceType"], "physical": r.get("PhysicalResourceId", "")}
    out["resources"] = created
    for logical_id, resource in resources.items():
        if logical_id not in created and "Condition" not in resource:
            out["unchecked"][logical_id] = resource["Type"]

    for logical_id, r in created.items():
        if r["type"] == "AWS::Lambda::Function":
            c = lam.get_function_configuration(FunctionName=r["physical"])
            role = c["Role"].rsplit("/", 1)[-1]
            policies = [policy_document(iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"])
                        for name in iam.list_role_policies(RoleName=role)["PolicyNames"]]
            managed = [p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"]]
            out["functions"][logical_id] = {
                "name": c["FunctionName"],
                "arn": c["FunctionArn"],
                "runtime": c.get("Runtime", ""),
                "handler": c.get("Handler", ""),
                "memorySize": c.get("MemorySize", 0),
                "timeout": c.get("Timeout", 0),
                "environment": {k: str(v) for k, v in c.get("Environment", {}).get("Variables", {}).items()},
                "role": c["Role"],
                "policies": policies,
                "managedPolicies": managed,
            }
        elif r["type"] == "AWS::DynamoDB::Table":
            t = dynamodb.describe_table(TableName=r["physical"])["Table"]
            ttl = dynamodb.describe_time_to_live(TableName=r["physical"])["TimeToLiveDescription"]
            out["tables"][logical_id] = {
                "name": t["TableName"],
                "arn": t["TableArn"],
                "keys": [f"{k['AttributeName']} {k['KeyType']}" for k in t["KeySchema"]],
                "indexes": {ix["IndexName"]: [f"{k['AttributeName']} {k['KeyType']}" for k in ix["KeySchema"]]
                            for ix in t.get("GlobalSecondaryIndexes", []) + t.get("LocalSecondaryIndexes", [])},
                "ttl": ttl.get("AttributeName", "") if ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING") else "",
            }
        elif r["type"] == "AWS::Events::Rule":
            rule = events.describe_rule(Name=r["physical"])
            targets = events.list_targets_by_rule(Rule=r["physical"])["Targets"]
            out["rules"][logical_id] = {
                "pattern": json.loads(rule.get("EventPattern", "{}")),
                "state": rule.get("State", ""),
                "targets": [t["Arn"] for t in targets],
            }
    out["buses"] = [b["Name"] for b in events.list_event_buses()["EventBuses"]]
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
