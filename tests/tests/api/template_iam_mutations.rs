//! The template's IAM check (`template::template_function_roles_have_exactly_the_expected_actions`)
//! fails on least-privilege breaches: this binary runs it again against mutated copies of
//! template.yaml (the receiver reading the database owner's secret, the worker sending to every
//! queue, an `Action: "*"` policy attached to the receiver's role).

/// Runs this binary's `template::template_function_roles_have_exactly_the_expected_actions`
/// against `yaml` (through `HOOKLEDGER_TEMPLATE`, as the template test documents): whether it
/// passed, and its output.
fn iam_test_passes_on(yaml: &str, tag: &str) -> (bool, String) {
    let dir = std::env::temp_dir().join(format!("hookledger-iam-mutations-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{tag}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "template::template_function_roles_have_exactly_the_expected_actions",
            "--exact",
            "--test-threads=1",
        ])
        .env("HOOKLEDGER_TEMPLATE", &path)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("1 passed") || text.contains("1 failed"),
        "{text}"
    );
    (output.status.success(), text)
}

/// Contract 5 names each function's secrets: "receiver `secretsmanager:GetSecretValue` (its DB
/// secret + sources)", the worker's targets "named ARNs only". The template test checks the
/// actions and a `*` on secrets and functions only: a template that lets the RECEIVER read the
/// database OWNER's secret, one that lets the worker send to every queue (`Resource: "*"`), and
/// one that attaches an `Action: "*"` policy to the receiver's role through a separate
/// `AWS::IAM::Policy` all pass it.
#[test]
fn the_template_iam_test_catches_least_privilege_breaches() {
    let original =
        std::fs::read_to_string(hookledger_tests::repo_root().join("template.yaml")).unwrap();
    let receiver_secrets = "                - !If [GenerateReceiverSecret, !Ref ReceiverDatabaseSecret, !Ref ReceiverDatabaseSecretArn]\n                - !Ref SourcesSecretArn\n            - Effect: Allow\n              Action: lambda:InvokeFunction";
    let worker_queue = "Action: sqs:SendMessage\n                Resource: !Ref OutboxQueueArns";
    assert!(original.contains(receiver_secrets) && original.contains(worker_queue));
    let mutations = [
        (
            "receiver-reads-admin-secret",
            original.replacen(
                receiver_secrets,
                &receiver_secrets.replacen(
                    "                - !Ref SourcesSecretArn\n",
                    "                - !Ref SourcesSecretArn\n                - !Ref DatabaseAdminSecretArn\n",
                    1,
                ),
                1,
            ),
        ),
        (
            "worker-sends-anywhere",
            original.replacen(
                worker_queue,
                "Action: sqs:SendMessage\n                Resource: \"*\"",
                1,
            ),
        ),
        (
            "receiver-role-admin-policy",
            original.replacen(
                "\nResources:\n",
                "\nResources:\n  ReviewExtraPolicy:\n    Type: AWS::IAM::Policy\n    Properties:\n      PolicyName: everything\n      Roles: [!Ref ReceiverFunctionRole]\n      PolicyDocument:\n        Version: \"2012-10-17\"\n        Statement:\n          - Effect: Allow\n            Action: \"*\"\n            Resource: \"*\"\n",
                1,
            ),
        ),
    ];
    let mut passed = Vec::new();
    for (tag, yaml) in &mutations {
        assert_ne!(yaml, &original, "{tag}: the mutation applied");
        if iam_test_passes_on(yaml, tag).0 {
            passed.push(*tag);
        }
    }
    assert!(
        passed.is_empty(),
        "the template IAM test passed these least-privilege breaches: {passed:?}"
    );
}
