//! `template.yaml` against the code: the timeouts form one chain from the
//! contract's constants (5 x 20 s + 2 s + 10 s + 6 x 2 x 3 s, plus the secret read) up to
//! the front door, and the deployment is what the contract says it is.

use std::path::Path;
use std::time::Duration;

use refund_chat::config::{
    BUDGET_OPERATIONS_PER_REQUEST, CONVERSATION_OPERATIONS_PER_REQUEST, Config, DEFAULT_IDEMPOTENCY_TTL,
    DEFAULT_LEDGER_TIMEOUT, DEFAULT_OPENAI_TIMEOUT, DEFAULT_ORDERS_TIMEOUT, DEFAULT_PAYMENTS_TIMEOUT,
    DEFAULT_RETRY_BACKOFF, LEDGER_OPERATIONS_PER_REQUEST,
};
use refund_chat::secrets::SECRET_READ_TIMEOUT;
use refund_chat::turn::worst_case_duration;
use serde_json::{Value, json};

fn template() -> Value {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("template.yaml")).unwrap();
    serde_norway::from_str(&text).expect("template.yaml is plain YAML (long-form intrinsic functions)")
}

fn function(template: &Value) -> &Value {
    &template["Resources"]["RefundChatFunction"]
}

fn secs(value: &Value) -> Duration {
    Duration::from_secs_f64(
        value
            .as_str()
            .and_then(|s| s.parse().ok())
            .or(value.as_f64())
            .expect("seconds"),
    )
}

#[test]
fn timeouts_cover_the_worst_case_from_the_code() {
    let template = template();
    let function = function(&template);
    let env = &function["Properties"]["Environment"]["Variables"];

    // The template deploys the code's defaults, so the code's worst case is the template's.
    assert_eq!(secs(&env["OPENAI_TIMEOUT_SECS"]), DEFAULT_OPENAI_TIMEOUT);
    assert_eq!(secs(&env["RETRY_BACKOFF_SECS"]), DEFAULT_RETRY_BACKOFF);
    assert_eq!(secs(&env["PAYMENTS_TIMEOUT_SECS"]), DEFAULT_PAYMENTS_TIMEOUT);
    assert_eq!(secs(&env["ORDERS_TIMEOUT_SECS"]), DEFAULT_ORDERS_TIMEOUT);
    assert_eq!(env["ORDERS_BASE_URL"], json!({"Ref": "OrdersBaseUrl"}));
    assert_eq!(secs(&env["LEDGER_TIMEOUT_SECS"]), DEFAULT_LEDGER_TIMEOUT);
    assert_eq!(secs(&env["IDEMPOTENCY_TTL_HOURS"]) * 3600, DEFAULT_IDEMPOTENCY_TTL);
    let lookup = |name: &str| match name {
        "OPENAI_API_KEY_SECRET_ID" => Some("arn:aws:secretsmanager:eu-west-1:123456789012:secret:k".to_owned()),
        "PAYMENTS_BASE_URL" => Some("https://payments.internal".to_owned()),
        "ORDERS_BASE_URL" => Some("https://orders.internal".to_owned()),
        "LEDGER_TABLE" => Some("refund-ledger".to_owned()),
        "CONVERSATION_TABLE" => Some("refund-chat-conversations".to_owned()),
        // Resolved from the stack's secret at deploy time.
        "VISITOR_ADDRESS_KEY" => Some("k".repeat(48)),
        _ => env[name].as_str().map(str::to_owned),
    };
    let worst_case = Config::from_lookup(lookup).unwrap().worst_case();
    assert_eq!(
        worst_case,
        worst_case_duration(
            Duration::from_secs(20),
            Duration::from_secs(2),
            Duration::from_secs(10),
            Duration::from_secs(3)
        ) + SECRET_READ_TIMEOUT
            + refund_chat::config::DEFAULT_ROUTER_TIMEOUT
            + DEFAULT_LEDGER_TIMEOUT
                * (LEDGER_OPERATIONS_PER_REQUEST + CONVERSATION_OPERATIONS_PER_REQUEST + BUDGET_OPERATIONS_PER_REQUEST)
            + refund_chat::config::DEFAULT_LIVE_PUBLISH_TIMEOUT
    );
    assert_eq!(
        worst_case,
        Duration::from_millis(186_500),
        "143 s, 6 order reads of two 3 s tries, the routing call's 5 s and the live pokes' 0.5 s"
    );
    // The longest publish timeout the template allows keeps it under the Timeout too.
    let longest = template["Parameters"]["LivePublishTimeoutMs"]["MaxValue"]
        .as_u64()
        .unwrap();
    assert!(
        worst_case - refund_chat::config::DEFAULT_LIVE_PUBLISH_TIMEOUT + Duration::from_millis(longest)
            < refund_chat::config::FUNCTION_TIMEOUT
    );

    let function_timeout = secs(&function["Properties"]["Timeout"]);
    assert_eq!(
        function_timeout,
        refund_chat::config::FUNCTION_TIMEOUT,
        "refund-chat-admin reads `executing` records older than this as unknown"
    );
    assert!(
        function_timeout > worst_case,
        "function Timeout {function_timeout:?} must exceed {worst_case:?}"
    );

    // Contract 20: every route streams, so its integration may run 15
    // minutes on an account whose quotas were never raised.
    let events = function["Properties"]["Events"].as_object().unwrap();
    assert_eq!(
        events.len(),
        10,
        "the POST, the read and the rating, a customer's and a visitor's, the claim, and the page with its two files"
    );
    for (name, event) in events {
        let properties = &event["Properties"];
        assert_eq!(properties["ResponseTransferMode"], "RESPONSE_STREAM", "{name} streams");
        assert_eq!(
            properties["TimeoutInMillis"],
            json!({"Ref": "IntegrationTimeoutMillis"}),
            "{name}'s integration timeout"
        );
    }
    let parameter = &template["Parameters"]["IntegrationTimeoutMillis"];
    let front_door = Duration::from_millis(parameter["Default"].as_u64().unwrap());
    assert!(
        front_door > function_timeout,
        "the front door ({front_door:?}) must outlast the function ({function_timeout:?})"
    );
    let streaming_limit = Duration::from_secs(900);
    assert!(
        front_door <= streaming_limit,
        "a streamed integration runs 900 s at most"
    );
    assert_eq!(parameter["MaxValue"], json!(streaming_limit.as_millis() as u64));
}

#[test]
fn the_deployment_is_the_contracts() {
    let template = template();
    let function = function(&template);
    assert_eq!(function["Type"], "AWS::Serverless::Function");
    assert_eq!(function["Metadata"]["BuildMethod"], "rust-cargolambda");
    assert_eq!(
        function["Metadata"]["BuildProperties"]["Binary"],
        env!("CARGO_PKG_NAME")
    );
    assert_eq!(template["Globals"]["Function"]["Runtime"], "provided.al2023");
    assert_eq!(template["Globals"]["Function"]["Architectures"], json!(["arm64"]));

    let event = &function["Properties"]["Events"]["RefundChat"];
    assert_eq!(
        event["Type"], "Api",
        "a REST API: its timeout can be raised, an HTTP API's cannot"
    );
    assert_eq!(event["Properties"]["Path"], refund_chat::http::ROUTE);
    assert_eq!(event["Properties"]["Method"], "POST");
    let read = &function["Properties"]["Events"]["ReadConversation"];
    assert_eq!(read["Type"], "Api");
    assert_eq!(
        read["Properties"]["RestApiId"],
        json!({"Ref": "RefundChatApi"}),
        "the same API, its throttling and authorizer"
    );
    assert_eq!(
        read["Properties"]["Path"]
            .as_str()
            .map(|path| path.trim_end_matches("{id}")),
        Some(refund_chat::http::read::PREFIX)
    );
    assert_eq!(read["Properties"]["Method"], "GET");
    let api = &template["Resources"]["RefundChatApi"]["Properties"];
    assert_eq!(
        api["EndpointConfiguration"]["Type"], "REGIONAL",
        "only Regional/private REST APIs can exceed 29 s"
    );
    assert_eq!(api["StageName"], "Prod");
    // Opt-in: a new account cannot reserve any (its quota may be 10, 100 must stay free).
    let reserve = json!({"Fn::If": ["ReservesConcurrency", {"Ref": "ReservedConcurrency"}, {"Ref": "AWS::NoValue"}]});
    assert_eq!(function["Properties"]["ReservedConcurrentExecutions"], reserve);
    assert_eq!(
        template["Parameters"]["ReservedConcurrency"]["Default"], 0,
        "none by default"
    );
    assert_eq!(
        template["Conditions"]["ReservesConcurrency"],
        json!({"Fn::Not": [{"Fn::Equals": [{"Ref": "ReservedConcurrency"}, 0]}]})
    );
    assert_eq!(
        template["Resources"]["RefundChatSweepFunction"]["Properties"]["ReservedConcurrentExecutions"],
        json!({"Fn::If": ["ReservesConcurrency", 1, {"Ref": "AWS::NoValue"}]})
    );
    let throttling = &api["MethodSettings"][0];
    assert_eq!(throttling["ThrottlingRateLimit"], json!({"Ref": "ThrottlingRateLimit"}));
    assert_eq!(
        throttling["ThrottlingBurstLimit"],
        json!({"Ref": "ThrottlingBurstLimit"})
    );
    let budget = refund_chat::config::DEFAULT_BUDGET;
    let env = &function["Properties"]["Environment"]["Variables"];
    assert_eq!(env["CUSTOMER_TURNS_PER_HOUR"], budget.turns_per_hour.to_string());
    assert_eq!(env["CUSTOMER_TOKENS_PER_DAY"], budget.tokens_per_day.to_string());

    assert_eq!(
        function["Properties"]["EventInvokeConfig"]["MaximumRetryAttempts"], 0,
        "Lambda must never retry a turn that may have refunded"
    );
    assert_eq!(
        function["Properties"]["LoggingConfig"]["LogGroup"],
        json!({"Ref": "RefundChatLogs"})
    );
    assert!(template["Resources"]["RefundChatLogs"]["Properties"]["RetentionInDays"].is_object());

    // Least privilege: one action on the one secret, and exactly the ledger
    // operations the code makes, on the one table.
    assert_eq!(
        function["Properties"]["Role"],
        json!({"Fn::GetAtt": ["RefundChatFunctionRole", "Arn"]}),
        "its own role: SAM's would attach AWSLambdaBasicExecutionRole, logs on *"
    );
    assert!(function["Properties"]["Policies"].is_null());
    let role = &template["Resources"]["RefundChatFunctionRole"]["Properties"];
    assert!(role["ManagedPolicyArns"].is_null(), "no managed policy");
    let policies = role["Policies"].as_array().unwrap();
    assert_eq!(policies.len(), 1);
    let every_statement = policies[0]["PolicyDocument"]["Statement"].as_array().unwrap();
    // Contract 30 (the seventh review): the staff's own partitions are
    // denied to the customer function, every one the code names, on the
    // table and its indexes, whatever the allows below grant.
    let denied: Vec<&Value> = every_statement.iter().filter(|s| s["Effect"] == "Deny").collect();
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(denied[0]["Sid"], "NoDeskItems");
    assert_eq!(denied[0]["Action"], "dynamodb:*");
    assert_eq!(
        denied[0]["Condition"]["ForAnyValue:StringLike"]["dynamodb:LeadingKeys"],
        json!(refund_chat::ledger::dynamo::schema::STAFF_ONLY_KEYS)
    );
    assert_eq!(
        denied[0]["Resource"],
        json!([
            {"Fn::GetAtt": ["ConversationTable", "Arn"]},
            {"Fn::Sub": "${ConversationTable.Arn}/index/*"}
        ])
    );
    let statements: Vec<Value> = every_statement
        .iter()
        .filter(|s| s["Effect"] == "Allow")
        .cloned()
        .collect();
    assert_eq!(statements.len(), 6);
    // Live pokes (contract 31): publishing on the two namespaces, nothing else of AppSync.
    assert_eq!(
        (statements[5]["Action"].clone(), statements[5]["Resource"].clone()),
        (
            json!("appsync:EventPublish"),
            json!([
                {"Fn::GetAtt": ["LiveConversationsNamespace", "ChannelNamespaceArn"]},
                {"Fn::GetAtt": ["LiveDeskNamespace", "ChannelNamespaceArn"]}
            ])
        )
    );
    assert_eq!(
        (statements[4]["Action"].clone(), statements[4]["Resource"].clone()),
        (json!(["xray:PutTraceSegments", "xray:PutTelemetryRecords"]), json!("*")),
        "active tracing's segments: X-Ray takes no resource scope, and nothing else is on *"
    );
    assert_eq!(function["Properties"]["Tracing"], "Active");
    assert_eq!(
        (statements[3]["Action"].clone(), statements[3]["Resource"].clone()),
        (
            json!(["logs:CreateLogStream", "logs:PutLogEvents"]),
            json!({"Fn::GetAtt": ["RefundChatLogs", "Arn"]})
        ),
        "its logs, in its own log group only"
    );
    assert_eq!(statements[0]["Action"], "secretsmanager:GetSecretValue");
    assert_eq!(statements[0]["Resource"], json!({"Ref": "OpenAiKeySecretArn"}));
    let env = &function["Properties"]["Environment"]["Variables"];
    assert_eq!(env["OPENAI_API_KEY_SECRET_ID"], json!({"Ref": "OpenAiKeySecretArn"}));
    let table = json!({"Fn::GetAtt": ["RefundLedger", "Arn"]});
    let actions = |statement: &Value| -> Vec<String> {
        match &statement["Action"] {
            Value::String(action) => vec![action.clone()],
            actions => actions
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        }
    };
    let conversations = &statements[2];
    assert_eq!(
        conversations["Resource"],
        json!({"Fn::GetAtt": ["ConversationTable", "Arn"]})
    );
    assert_eq!(
        actions(conversations),
        refund_chat::ledger::dynamo::conversations::ACTIONS_USED,
        "exactly what the code calls on conversations: no delete, no index"
    );
    assert_eq!(env["CONVERSATION_TABLE"], json!({"Ref": "ConversationTable"}));
    let mut granted: Vec<&str> = statements[1..2]
        .iter()
        .flat_map(|statement| {
            assert_eq!(statement["Resource"], table, "ledger actions on the ledger only");
            match &statement["Action"] {
                Value::String(action) => vec![action.as_str()],
                actions => actions.as_array().unwrap().iter().filter_map(Value::as_str).collect(),
            }
        })
        .collect();
    granted.sort();
    let mut used = refund_chat::ledger::dynamo::ACTIONS_USED.to_vec();
    used.sort();
    assert_eq!(granted, used, "the function's role grants exactly what the code calls");
    assert!(
        !serde_json::to_string(policies).unwrap().contains("Delete"),
        "the function deletes nothing: not a refund record, not a conversation"
    );
    assert_eq!(env["LEDGER_TABLE"], json!({"Ref": "RefundLedger"}));
    assert_eq!(
        env["USER_IDENTITY"], "authorizer",
        "production trusts the authorizer, never the body"
    );
    assert_eq!(env["USER_ID_CLAIM"], "sub");
    let limits = refund_chat::config::DEFAULT_LIMITS;
    let cents = |name: &str| env[name].as_str().and_then(|v| v.parse::<u64>().ok());
    assert_eq!(cents("AUTO_REFUND_LIMIT_CENTS"), Some(limits.auto_refund_limit.cents()));
    assert_eq!(
        cents("USER_DAILY_AUTO_LIMIT_CENTS"),
        Some(limits.user_daily_auto_limit.cents())
    );
    assert_eq!(secs(&env["ORDER_REFUND_WINDOW_HOURS"]) * 3600, limits.order_window);
    // Nothing is granted on *: not to the function (but X-Ray's two trace
    // actions, which take no resource), the sweep or the event pipes.
    let mut scoped = policies.clone();
    if let Some(statements) = scoped[0]["PolicyDocument"]["Statement"].as_array_mut() {
        statements.retain(|statement| statement["Sid"] != "SendTraces");
    }
    let roles = json!([
        scoped,
        template["Resources"]["RefundChatSweepRole"]["Properties"]["Policies"],
        template["Resources"]["EventPipesRole"]["Properties"]["Policies"]
    ]);
    assert!(
        !serde_json::to_string(&roles).unwrap().contains("\"*\""),
        "nothing is granted on *"
    );
}

#[test]
fn the_ledger_table_keeps_every_record() {
    let template = template();
    let table = &template["Resources"]["RefundLedger"];
    assert_eq!(table["Type"], "AWS::DynamoDB::Table");
    assert_eq!(table["DeletionPolicy"], "Retain");
    assert_eq!(table["UpdateReplacePolicy"], "Retain");
    let properties = &table["Properties"];
    assert_eq!(properties["BillingMode"], "PAY_PER_REQUEST");
    assert_eq!(properties["DeletionProtectionEnabled"], true);
    assert_eq!(
        properties["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"],
        true
    );
    // The table's shape is the code's (ledger::dynamo::schema), which is also
    // what local stacks and tests create.
    let schema = refund_chat::ledger::dynamo::schema::cloudformation();
    for (property, expected) in schema.as_object().expect("an object") {
        assert_eq!(&properties[property], expected, "RefundLedger's {property}");
    }
}

#[test]
fn a_deploy_leaves_the_accounts_other_stacks_as_they_were() {
    let template = template();
    let resources = &template["Resources"];
    // The account-wide API Gateway logging role: a choice, kept on delete.
    assert_eq!(
        template["Parameters"]["ApiGatewayLoggingRole"]["AllowedValues"],
        json!(["create", "existing"])
    );
    for name in ["ApiGatewayLogsRole", "ApiGatewayAccount"] {
        let resource = &resources[name];
        assert_eq!(resource["Condition"], "CreatesApiGatewayLoggingRole", "{name}");
        assert_eq!(resource["DeletionPolicy"], "Retain", "{name}");
        assert_eq!(resource["UpdateReplacePolicy"], "Retain", "{name}");
    }
    let waits: Vec<&str> = resources["ApiGatewayAccount"]["DependsOn"]
        .as_array()
        .expect("DependsOn a list")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // The role by its GetAtt; then the tables, whose creation outlasts IAM's propagation.
    assert_eq!(
        resources["ApiGatewayAccount"]["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0],
        "ApiGatewayLogsRole"
    );
    assert_eq!(waits, ["RefundLedger", "ConversationTable"]);
    assert!(
        resources["RefundChatApi"]["DependsOn"].is_null(),
        "the API does not depend on a resource that may not exist"
    );
    // A parameter change reaches the live stage.
    assert_eq!(resources["RefundChatApi"]["Properties"]["AlwaysDeploy"], true);
    // What holds the support team's context is kept when the stack goes.
    for name in [
        "ConversationTable",
        "RefundAwaitingApprovalPipeDeadLetters",
        "RefundOutcomeUnknownPipeDeadLetters",
        "ConversationHandedOffPipeDeadLetters",
    ] {
        assert_eq!(resources[name]["DeletionPolicy"], "Retain", "{name}");
        assert_eq!(resources[name]["UpdateReplacePolicy"], "Retain", "{name}");
    }
    // A secret ARN without its six random characters is refused at deploy
    // time, not denied at run time.
    let pattern = template["Parameters"]["OpenAiKeySecretArn"]["AllowedPattern"]
        .as_str()
        .expect("a pattern");
    assert!(pattern.ends_with("-[A-Za-z0-9]{6}"), "{pattern}");
}

#[test]
fn the_conversation_table_is_the_codes_encrypted_and_expiring() {
    let template = template();
    let table = &template["Resources"]["ConversationTable"];
    assert_eq!(table["Type"], "AWS::DynamoDB::Table");
    let properties = &table["Properties"];
    let schema = refund_chat::ledger::dynamo::schema::conversations_cloudformation();
    for (property, expected) in schema.as_object().expect("an object") {
        assert_eq!(&properties[property], expected, "ConversationTable's {property}");
    }
    assert_eq!(
        properties["SSESpecification"],
        json!({"SSEEnabled": true, "SSEType": "KMS"})
    );
    assert_eq!(properties["TimeToLiveSpecification"]["Enabled"], true);
    assert!(
        properties["PointInTimeRecoverySpecification"].is_null(),
        "a forgotten conversation must not live on in a backup"
    );
}

#[test]
fn every_route_needs_a_signed_in_customer_or_guest() {
    let template = template();
    let auth = &template["Resources"]["RefundChatApi"]["Properties"]["Auth"];
    assert_eq!(auth["DefaultAuthorizer"], "CustomerCognito");
    // The shop's customers, and the guests who proved their e-mail (contract 27).
    assert_eq!(
        auth["Authorizers"]["CustomerCognito"]["UserPoolArn"],
        json!([{"Ref": "CustomerUserPoolArn"}, {"Fn::GetAtt": ["GuestUserPool", "Arn"]}])
    );
    assert_eq!(
        auth["AddDefaultAuthorizerToCorsPreflight"], false,
        "a preflight carries no token"
    );
    let index = &template["Resources"]["RefundLedger"]["Properties"]["GlobalSecondaryIndexes"][0];
    assert_eq!(index["IndexName"], refund_chat::ledger::dynamo::WAITING_INDEX);
    assert_eq!(
        index["KeySchema"],
        json!([{"AttributeName": "waiting_for", "KeyType": "HASH"}, {"AttributeName": "created_at", "KeyType": "RANGE"}])
    );
}

/// Contract 27: the visitors' routes take no authorizer and have a
/// throttle of their own below the stage's; the function gets the address
/// key from a secret of the stack's; the alarm divides by the day it deploys.
#[test]
fn visitors_and_the_page_have_open_routes_visitors_throttled_on_their_own_and_a_day_watched_at_three_quarters() {
    let template = template();
    let resources = &template["Resources"];
    let events = &function(&template)["Properties"]["Events"];
    for (event, path, method) in [
        ("VisitorChat", "/support/refund-chat/visitor", "POST"),
        (
            "VisitorReadConversation",
            "/support/refund-chat/visitor/conversations/{id}",
            "GET",
        ),
        // Every visitor route (the seventh review): the rating too.
        (
            "VisitorRateConversation",
            "/support/refund-chat/visitor/conversations/{id}/rating",
            "POST",
        ),
    ] {
        let properties = &events[event]["Properties"];
        assert_eq!(properties["Path"], path);
        assert_eq!(properties["Method"], method);
        assert_eq!(properties["Auth"]["Authorizer"], "NONE", "{event}");
        let encoded = path.replace('/', "~1");
        let settings = resources["RefundChatApi"]["Properties"]["MethodSettings"]
            .as_array()
            .unwrap();
        let throttle = settings
            .iter()
            .find(|s| s["ResourcePath"] == format!("/{encoded}") && s["HttpMethod"] == method)
            .unwrap_or_else(|| panic!("no throttle of its own for {method} {path}"));
        assert_eq!(throttle["ThrottlingRateLimit"], json!({"Ref": "VisitorRateLimit"}));
        assert_eq!(throttle["ThrottlingBurstLimit"], json!({"Ref": "VisitorBurstLimit"}));
    }
    // "Confirm my e-mail" only with the shop's SES identity and its From
    // (the seventh review): without both, the page is given no sign-in.
    let env = &function(&template)["Properties"]["Environment"]["Variables"];
    let offered = env["GUEST_SIGN_IN_URL"]["Fn::If"]
        .as_array()
        .expect("the sign-in is conditional");
    assert_eq!(offered[0], "OffersGuestSignIn");
    assert_eq!(offered[2], json!({"Ref": "AWS::NoValue"}));
    // The audience stays, whatever is offered: another client's token is refused.
    assert_eq!(env["GUEST_POOL_CLIENT_ID"], json!({"Ref": "GuestUserPoolClient"}));
    assert_eq!(
        template["Conditions"]["OffersGuestSignIn"],
        json!({"Fn::And": [{"Condition": "HasGuestEmailIdentity"}, {"Condition": "HasGuestEmailFrom"}]})
    );
    assert_eq!(template["Parameters"]["GuestEmailFrom"]["Default"], "");
    // What a deploy prints for the open doors (the deploy review): the
    // page's address and the guest pool's id.
    let outputs = &template["Outputs"];
    assert_eq!(outputs["GuestUserPoolId"]["Value"], json!({"Ref": "GuestUserPool"}));
    assert!(
        outputs["ChatPageUrl"]["Value"]["Fn::Sub"]
            .as_str()
            .is_some_and(|url| url.ends_with("/Prod/support/"))
    );
    let parameters = &template["Parameters"];
    assert!(
        parameters["VisitorRateLimit"]["Default"].as_u64() < parameters["ThrottlingRateLimit"]["Default"].as_u64()
            && parameters["VisitorBurstLimit"]["Default"].as_u64()
                < parameters["ThrottlingBurstLimit"]["Default"].as_u64(),
        "below the customers'"
    );
    // The page and its files hold no data: no token either.
    for (event, path) in [
        ("ChatPage", "/support/"),
        ("ChatScript", "/support/chat.js"),
        ("ChatStyle", "/support/chat.css"),
    ] {
        let properties = &events[event]["Properties"];
        assert_eq!(
            (properties["Path"].as_str(), properties["Method"].as_str()),
            (Some(path), Some("GET"))
        );
        assert_eq!(properties["Auth"]["Authorizer"], "NONE", "{event}");
    }
    // Every other route keeps the customers' authorizer.
    for (name, event) in events.as_object().unwrap() {
        if !name.starts_with("Visitor") && !name.starts_with("Chat") {
            assert!(event["Properties"]["Auth"].is_null(), "{name}");
        }
    }
    let env = &function(&template)["Properties"]["Environment"]["Variables"];
    assert_eq!(env["VISITORS"], "on");
    assert_eq!(
        env["VISITOR_ADDRESS_KEY"],
        json!({"Fn::Sub": "{{resolve:secretsmanager:${VisitorAddressKey}:SecretString}}"})
    );
    let key = &resources["VisitorAddressKey"];
    assert_eq!(key["Type"], "AWS::SecretsManager::Secret");
    assert!(
        key["Properties"]["GenerateSecretString"]["PasswordLength"].as_u64()
            >= Some(refund_chat::keyed_hash::AddressKey::MIN_CHARS as u64)
    );
    // One parameter feeds each day's variable and its alarm (the deploy review).
    for (variable, parameter, alarm, metric) in [
        (
            "VISITOR_TOKENS_PER_DAY",
            "VisitorTokensPerDay",
            "VisitorDayAlarm",
            "VisitorTokens",
        ),
        (
            "GUEST_TOKENS_PER_DAY",
            "GuestTokensPerDay",
            "GuestDayAlarm",
            "GuestTokens",
        ),
    ] {
        assert_eq!(env[variable], json!({ "Ref": parameter }));
        assert_eq!(template["Parameters"][parameter]["Default"], 2_000_000);
        let alarm = &resources[alarm]["Properties"];
        assert_eq!(
            alarm["Metrics"][0]["Expression"],
            json!({"Fn::Sub": format!("FILL(m0, 0) / ${{{parameter}}}")})
        );
        assert_eq!(alarm["Threshold"], 0.75);
        assert_eq!(alarm["Metrics"][1]["MetricStat"]["Metric"]["MetricName"], metric);
        assert_eq!(alarm["Metrics"][1]["MetricStat"]["Period"], 86_400);
    }
}

/// What a shop switches on is a parameter, not a literal to edit (the
/// deploy review), and the parameters' patterns take what the code takes.
#[test]
fn the_shops_switches_are_parameters() {
    let template = template();
    let env = &function(&template)["Properties"]["Environment"]["Variables"];
    let parameters = &template["Parameters"];
    for (variable, parameter) in [
        ("AGENT_INTENTS", "AgentIntents"),
        ("GUEST_INTENTS", "GuestIntents"),
        ("RETURN_LABEL_ORIGINS", "ReturnLabelOrigins"),
        ("CUSTOMER_POOL_CLIENT_IDS", "CustomerPoolClientIds"),
    ] {
        assert_eq!(env[variable], json!({ "Ref": parameter }), "{variable}");
        let default = parameters[parameter]["Default"].as_str().unwrap();
        let pattern = regex_lite::Regex::new(&format!(
            "^(?:{})$",
            parameters[parameter]["AllowedPattern"].as_str().unwrap()
        ))
        .unwrap();
        assert!(pattern.is_match(default), "{parameter}'s default fails its own pattern");
    }
    // The defaults are the code's own.
    let config = refund_chat::config::Config::from_lookup(|name| match name {
        "OPENAI_API_KEY_SECRET_ID" | "LEDGER_TABLE" | "CONVERSATION_TABLE" => Some("x".into()),
        "PAYMENTS_BASE_URL" | "ORDERS_BASE_URL" => Some("http://127.0.0.1:1".into()),
        "AGENT_INTENTS" => parameters["AgentIntents"]["Default"].as_str().map(str::to_owned),
        "GUEST_INTENTS" => parameters["GuestIntents"]["Default"].as_str().map(str::to_owned),
        _ => None,
    })
    .unwrap();
    let defaults = refund_chat::config::Config::from_lookup(|name| match name {
        "OPENAI_API_KEY_SECRET_ID" | "LEDGER_TABLE" | "CONVERSATION_TABLE" => Some("x".into()),
        "PAYMENTS_BASE_URL" | "ORDERS_BASE_URL" => Some("http://127.0.0.1:1".into()),
        _ => None,
    })
    .unwrap();
    assert_eq!(config.router.served, defaults.router.served);
    assert_eq!(config.guest_intents, defaults.guest_intents);
    let origins = regex_lite::Regex::new(&format!(
        "^(?:{})$",
        parameters["ReturnLabelOrigins"]["AllowedPattern"].as_str().unwrap()
    ))
    .unwrap();
    assert!(origins.is_match("https://returns.shop.example,https://labels.carrier.example"));
    assert!(!origins.is_match("http://returns.shop.example"), "https only");
}

/// Contract 32: the hours and the reply times are parameters the chat's
/// function reads (the desk the hours alone), their defaults the code's;
/// the sweep's `HandoffsOverdue` has its alarm.
#[test]
fn office_hours_are_a_parameter_and_what_is_overdue_alarms() {
    let template = template();
    let resources = &template["Resources"];
    let parameters = &template["Parameters"];
    let env = &function(&template)["Properties"]["Environment"]["Variables"];
    let desk = &resources["RefundChatStaffFunction"]["Properties"]["Environment"]["Variables"];
    for (variable, parameter) in [
        ("OFFICE_HOURS", "OfficeHours"),
        ("REPLY_TIME_MINUTES", "ReplyTimeMinutes"),
        ("REPLY_DUE_MINUTES", "ReplyDueMinutes"),
    ] {
        assert_eq!(env[variable], json!({ "Ref": parameter }), "{variable}");
    }
    assert_eq!(desk["OFFICE_HOURS"], json!({ "Ref": "OfficeHours" }));
    // The defaults are the code's: always open, 30 minutes said, 60 due.
    assert_eq!(parameters["OfficeHours"]["Default"], "");
    let office = refund_chat::office_hours::expected::Office::default();
    assert_eq!(
        parameters["ReplyTimeMinutes"]["Default"],
        json!(office.reply_time_minutes)
    );
    assert_eq!(
        parameters["ReplyDueMinutes"]["Default"],
        json!(office.reply_due_minutes)
    );
    let alarm = &resources["HandoffsOverdueAlarmResource"]["Properties"];
    assert_eq!(alarm["MetricName"], "HandoffsOverdue");
    assert_eq!(
        alarm["Dimensions"][0]["Value"],
        json!({"Ref": "RefundChatSweepFunction"})
    );
    assert_eq!(alarm["Threshold"], json!({"Ref": "HandoffsOverdueAlarm"}));
    assert_eq!(alarm["ComparisonOperator"], "GreaterThanThreshold");
    // The sweep reads the open handoffs' index to count them.
    assert_eq!(
        resources["RefundChatSweepFunction"]["Properties"]["Environment"]["Variables"]["CONVERSATION_TABLE"],
        json!({"Ref": "ConversationTable"})
    );
}

/// Contract 27: the optional web ACL, on by default: a rate per source
/// address on the stage and a lower one on the guest pool's calls that send
/// an e-mail or start a sign-in.
#[test]
fn a_web_acl_bounds_each_address_on_the_stage_and_the_guest_pool() {
    let template = template();
    let resources = &template["Resources"];
    let parameters = &template["Parameters"];
    assert!(
        parameters["WafRateLimit"]["Default"].as_u64() > Some(0),
        "on by default"
    );
    assert!(parameters["WafGuestRateLimit"]["Default"].as_u64() < parameters["WafRateLimit"]["Default"].as_u64());
    assert!(
        parameters["WafGuestRateLimit"]["MinValue"].as_u64() >= Some(10),
        "WAF's least limit"
    );
    let acl = &resources["WebAcl"];
    assert_eq!(acl["Condition"], "HasWaf");
    assert_eq!(acl["Properties"]["Scope"], "REGIONAL");
    let rules = acl["Properties"]["Rules"].as_array().unwrap();
    let limit = |rule: &Value| rule["Statement"]["RateBasedStatement"]["Limit"].clone();
    let guests = rules
        .iter()
        .find(|r| limit(r) == json!({"Ref": "WafGuestRateLimit"}))
        .unwrap();
    let everyone = rules
        .iter()
        .find(|r| limit(r) == json!({"Ref": "WafRateLimit"}))
        .unwrap();
    for rule in [guests, everyone] {
        assert_eq!(rule["Statement"]["RateBasedStatement"]["AggregateKeyType"], "IP");
        assert!(rule["Action"]["Block"].is_object());
    }
    let targets: Vec<&str> =
        guests["Statement"]["RateBasedStatement"]["ScopeDownStatement"]["OrStatement"]["Statements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                assert_eq!(
                    s["ByteMatchStatement"]["FieldToMatch"]["SingleHeader"]["Name"],
                    "x-amz-target"
                );
                s["ByteMatchStatement"]["SearchString"].as_str().unwrap()
            })
            .collect();
    assert_eq!(
        targets,
        [
            "AWSCognitoIdentityProviderService.SignUp",
            "AWSCognitoIdentityProviderService.InitiateAuth",
            "AWSCognitoIdentityProviderService.ResendConfirmationCode"
        ]
    );
    assert_eq!(
        resources["WebAclOnTheGuestPool"]["Properties"]["ResourceArn"],
        json!({"Fn::GetAtt": ["GuestUserPool", "Arn"]})
    );
    assert!(
        resources["WebAclOnTheStage"]["Properties"]["ResourceArn"]["Fn::Sub"]
            .as_str()
            .is_some_and(|arn| arn.ends_with("/stages/${RefundChatApi.Stage}"))
    );
}

#[test]
fn a_browser_widget_may_send_the_key_and_the_token() {
    let template = template();
    let cors = &template["Resources"]["RefundChatApi"]["Properties"]["Cors"];
    let allowed = cors["AllowHeaders"].as_str().unwrap().to_lowercase();
    for header in ["content-type", "idempotency-key", "authorization", "x-visitor-token"] {
        assert!(allowed.contains(header), "{header} is not allowed by the preflight");
    }
    let methods = cors["AllowMethods"].as_str().unwrap();
    for method in ["GET", "POST"] {
        assert!(methods.contains(method), "{method} is not allowed by the preflight");
    }
}

/// Every variable `src/config/` reads: documented (the contract, or
/// docs/deploy.md for what goes beyond it), deployed by the template, and
/// set for `make run` unless its default serves. Adding a variable to the
/// code without the rest of the checklist in docs/architecture.md fails here.
#[test]
fn every_variable_the_code_reads_is_documented_and_deployed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |path: &str| std::fs::read_to_string(root.join(path)).unwrap();
    // Every file of src/config/, one reader each.
    let config: String = std::fs::read_dir(root.join("src/config"))
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .collect();
    let names: std::collections::BTreeSet<&str> = config
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            // A name has a letter: a test's "10081" is a value.
            s.len() > 3
                && s.chars().any(|c| c.is_ascii_uppercase())
                && s.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .collect();
    assert!(names.len() >= 15, "{names:?}");
    let docs = read("docs/contract.md") + &read("docs/deploy.md");
    let template = template();
    let env = &function(&template)["Properties"]["Environment"]["Variables"];
    let sweep = &template["Resources"]["RefundChatSweepFunction"]["Properties"]["Environment"]["Variables"];
    let desk = &template["Resources"]["RefundChatStaffFunction"]["Properties"]["Environment"]["Variables"];
    let live = &template["Resources"]["RefundChatLiveFunction"]["Properties"]["Environment"]["Variables"];
    for name in names {
        assert!(docs.contains(&format!("`{name}`")), "{name} is not documented");
        assert!(
            !env[name].is_null() || !sweep[name].is_null() || !desk[name].is_null() || !live[name].is_null(),
            "{name} is not in template.yaml's environment"
        );
    }
}

/// Every `MetricName` a JSON value holds, and every metric of a dashboard
/// body (`["RefundChat", "<name>", ...]` rows).
fn metric_names(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                match (key.as_str(), field) {
                    ("MetricName", Value::String(name)) => found.push(name.clone()),
                    ("DashboardBody", body) => {
                        let text = body["Fn::Sub"].as_str().unwrap_or_default();
                        for row in text.split("[\"RefundChat\", \"").skip(1) {
                            found.push(row.split('"').next().unwrap_or_default().to_owned());
                        }
                    }
                    _ => metric_names(field, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| metric_names(item, found)),
        _ => {}
    }
}

#[test]
fn every_metric_the_alarms_and_the_dashboard_name_is_one_the_code_emits() {
    let template = template();
    let namespace = refund_chat::ops::telemetry::METRICS_NAMESPACE;
    // The code's own metrics; the platform's (AWS/*) have a test of their
    // own, and the web ACL names the metrics WAF emits of it.
    let own: serde_json::Map<String, Value> = template["Resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, r)| {
            !r["Properties"]["Namespace"]
                .as_str()
                .is_some_and(|n| n.starts_with("AWS/"))
                && r["Type"] != "AWS::WAFv2::WebACL"
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let own = Value::Object(own);
    let mut names = Vec::new();
    metric_names(&own, &mut names);
    assert!(names.len() >= 20, "{names:?}");
    let emitted: Vec<&str> = refund_chat::ops::telemetry::COUNTERS
        .iter()
        .chain(refund_chat::ops::telemetry::HISTOGRAMS)
        .copied()
        .collect();
    for name in &names {
        assert!(
            emitted.contains(&name.as_str()),
            "{name} is not a metric the code emits"
        );
    }
    for required in [
        "RefundOutcomesUnknown",
        "LedgerFailures",
        "Responses",
        "BudgetRefusals",
        "Handoffs",
        "RoutingCalls",
        "RoutedTurns",
        "RoutingFailures",
    ] {
        assert!(names.iter().any(|n| n == required), "no alarm or widget on {required}");
    }
    // Every alarm's metric and every dashboard row is in the code's namespace.
    let text = serde_json::to_string(&own).unwrap();
    let namespaces: Vec<&str> = text
        .split("\"Namespace\":\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap_or_default())
        .collect();
    assert!(
        !namespaces.is_empty() && namespaces.iter().all(|n| *n == namespace),
        "{namespaces:?}"
    );
    let dashboard = template["Resources"]["RefundChatDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
        .as_str()
        .unwrap();
    assert_eq!(
        dashboard.matches("[\"").count(),
        dashboard.matches(&format!("[\"{namespace}\", ")).count(),
        "a dashboard row in another namespace"
    );
    // Every alarm notifies the topic.
    for (name, resource) in template["Resources"].as_object().unwrap() {
        if resource["Type"] == "AWS::CloudWatch::Alarm" {
            assert_eq!(
                resource["Properties"]["AlarmActions"],
                json!([{"Ref": "AlarmTopic"}]),
                "{name}"
            );
        }
    }
}

#[test]
fn the_events_are_the_codes_pipes_from_the_tables_streams_to_the_bus() {
    let template = template();
    let resources = &template["Resources"];
    for table in ["RefundLedger", "ConversationTable"] {
        assert_eq!(
            resources[table]["Properties"]["StreamSpecification"]["StreamViewType"], "NEW_AND_OLD_IMAGES",
            "{table}"
        );
    }
    for pipe in refund_chat::ops::events::PIPES {
        let properties = &resources[pipe.resource]["Properties"];
        assert_eq!(resources[pipe.resource]["Type"], "AWS::Pipes::Pipe");
        assert_eq!(
            properties["Source"],
            json!({"Fn::GetAtt": [pipe.table.resource(), "StreamArn"]})
        );
        let pattern: Value = serde_json::from_str(
            properties["SourceParameters"]["FilterCriteria"]["Filters"][0]["Pattern"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            pattern,
            serde_json::from_str::<Value>(pipe.pattern).unwrap(),
            "{}",
            pipe.resource
        );
        assert_eq!(properties["TargetParameters"]["InputTemplate"], pipe.input_template);
        let bus = &properties["TargetParameters"]["EventBridgeEventBusParameters"];
        assert_eq!(
            (bus["DetailType"].as_str(), bus["Source"].as_str()),
            (Some(pipe.detail_type), Some(refund_chat::ops::events::SOURCE))
        );
        assert_eq!(
            properties["Target"],
            json!({"Fn::GetAtt": ["RefundChatEventBus", "Arn"]})
        );
        let stream = &properties["SourceParameters"]["DynamoDBStreamParameters"];
        assert_eq!(stream["MaximumRetryAttempts"], 10);
        let dead_letters = format!("{}DeadLetters", pipe.resource);
        assert_eq!(
            stream["DeadLetterConfig"]["Arn"],
            json!({"Fn::GetAtt": [dead_letters, "Arn"]}),
            "an event the bus refuses is kept, not lost when the stream's 24 h end"
        );
        assert_eq!(resources[&dead_letters]["Type"], "AWS::SQS::Queue");
        let alarm = &resources[&format!("{dead_letters}Alarm")]["Properties"];
        assert_eq!(
            (alarm["Namespace"].as_str(), alarm["MetricName"].as_str()),
            (Some("AWS/SQS"), Some("ApproximateNumberOfMessagesVisible"))
        );
        assert_eq!(
            alarm["Dimensions"][0]["Value"],
            json!({"Fn::GetAtt": [dead_letters, "QueueName"]})
        );
        assert!(
            serde_json::to_string(&resources["EventPipesRole"])
                .unwrap()
                .contains(&dead_letters),
            "the pipes may send to {dead_letters}"
        );
    }
}

#[test]
fn the_platform_alarms_see_the_failures_the_function_cannot_report() {
    let template = template();
    let resources = &template["Resources"];
    let watched = |alarm: &str| -> (String, String, Value) {
        let p = &resources[alarm]["Properties"];
        assert_eq!(p["AlarmActions"], json!([{"Ref": "AlarmTopic"}]), "{alarm}");
        (
            p["Namespace"].as_str().unwrap().to_owned(),
            p["MetricName"].as_str().unwrap().to_owned(),
            p["Dimensions"][0]["Value"].clone(),
        )
    };
    let function = json!({"Ref": "RefundChatFunction"});
    for (alarm, metric) in [
        ("FunctionErrorsAlarm", "Errors"),
        ("FunctionThrottlesAlarm", "Throttles"),
        ("FunctionDurationNearTimeoutAlarm", "Duration"),
    ] {
        assert_eq!(watched(alarm), ("AWS/Lambda".into(), metric.into(), function.clone()));
    }
    let timeout_ms = secs(&self::function(&template)["Properties"]["Timeout"]).as_millis() as f64;
    let near = resources["FunctionDurationNearTimeoutAlarm"]["Properties"]["Threshold"]
        .as_f64()
        .unwrap();
    assert!(near < timeout_ms && near >= 0.8 * timeout_ms, "{near} of {timeout_ms}");
    assert_eq!(
        watched("SweepErrorsAlarm"),
        (
            "AWS/Lambda".into(),
            "Errors".into(),
            json!({"Ref": "RefundChatSweepFunction"})
        )
    );
    let api = watched("ApiServerErrorsAlarm");
    assert_eq!((api.0.as_str(), api.1.as_str()), ("AWS/ApiGateway", "5XXError"));
    assert_eq!(
        api.2, resources["RefundChatApi"]["Properties"]["Name"],
        "the alarm names the API it watches"
    );
}

#[test]
fn a_refund_left_executing_is_swept_to_unknown_on_a_schedule_with_least_privilege() {
    let template = template();
    let sweep = &template["Resources"]["RefundChatSweepFunction"];
    assert_eq!(sweep["Metadata"]["BuildProperties"]["Binary"], "refund-chat-sweep");
    let properties = &sweep["Properties"];
    assert_eq!(
        properties["Events"]["EveryFiveMinutes"]["Properties"]["Schedule"], "rate(5 minutes)",
        "the function's timeout plus five minutes is within the contract's 15"
    );
    let env = &properties["Environment"]["Variables"];
    assert_eq!(
        secs(&env["SWEEP_EXECUTING_AFTER_SECS"]),
        secs(&function(&template)["Properties"]["Timeout"]),
        "nothing is still paying past the function's timeout"
    );
    assert_eq!(env["LEDGER_TABLE"], json!({"Ref": "RefundLedger"}));
    let statements =
        &template["Resources"]["RefundChatSweepRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"];
    let granted: Vec<(String, String)> = statements
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["Action"].to_string(), s["Resource"].to_string()))
        .collect();
    assert_eq!(
        granted,
        [
            (
                json!("dynamodb:Query").to_string(),
                json!({"Fn::Sub": "${RefundLedger.Arn}/index/waiting"}).to_string()
            ),
            // The support team's queue's oldest wait (contract 24): the open handoffs.
            (
                json!("dynamodb:Query").to_string(),
                json!({"Fn::Sub": "${ConversationTable.Arn}/index/open_handoffs"}).to_string()
            ),
            (
                json!("dynamodb:UpdateItem").to_string(),
                json!({"Fn::GetAtt": ["RefundLedger", "Arn"]}).to_string()
            ),
            (
                json!(["logs:CreateLogStream", "logs:PutLogEvents"]).to_string(),
                json!({"Fn::GetAtt": ["RefundChatSweepLogs", "Arn"]}).to_string()
            ),
        ]
    );
    let alarm = &template["Resources"]["RefundLeftExecutingAlarm"]["Properties"];
    assert_eq!(alarm["MetricName"], "RefundsLeftExecuting");
    assert_eq!(
        alarm["Dimensions"][0]["Value"],
        json!({"Ref": "RefundChatSweepFunction"})
    );
}

#[test]
fn every_handoff_reason_and_every_intent_is_watched_and_routing_failures_alarm() {
    let template = template();
    let resources = &template["Resources"];
    // One series of every handoff, which the function counts beside each reason's.
    let handoffs = &resources["HandoffsAlarm"]["Properties"];
    assert_eq!(handoffs["MetricName"], "HandoffsTotal");
    assert_eq!(handoffs["Statistic"], "Sum");
    let dashboard = resources["RefundChatDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
        .as_str()
        .unwrap();
    for reason in refund_chat::handoff::Reason::ALL {
        assert!(
            dashboard.contains(&format!("\"Reason\", \"{}\"]", reason.as_str())),
            "the dashboard misses {reason:?}"
        );
    }
    for intent in refund_chat::router::Intent::ALL
        .iter()
        .map(|i| i.as_str())
        .chain(["unknown"])
    {
        assert!(
            dashboard.contains(&format!(
                "\"RoutedTurns\", \"FunctionName\", \"${{RefundChatFunction}}\", \"Intent\", \"{intent}\"]"
            )),
            "the router's widget misses {intent}"
        );
    }
    let alarm = &resources["RoutingFailuresAlarm"]["Properties"];
    let watched: Vec<&str> = alarm["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["MetricStat"]["Metric"]["MetricName"].as_str())
        .collect();
    assert_eq!(watched, ["RoutingCalls", "RoutingFailures"]);
    assert_eq!(alarm["Threshold"], json!({"Ref": "RoutingFailureShareAlarm"}));
    assert_eq!(template["Parameters"]["RoutingFailureShareAlarm"]["Default"], 0.1);
}

/// Contract 24: the desk is a function of its own on the same API, behind
/// the staff's own pool, with a role of its own; the customers' function
/// gains nothing.
#[test]
fn the_desk_is_a_function_of_its_own_behind_the_staff_pool() {
    let template = template();
    let resources = &template["Resources"];
    let desk = &resources["RefundChatStaffFunction"];
    assert_eq!(desk["Metadata"]["BuildProperties"]["Binary"], "refund-chat-staff");
    let env = &desk["Properties"]["Environment"]["Variables"];
    assert_eq!(env["STAFF_IDENTITY"], "authorizer", "never the headers");
    assert_eq!(
        env["STAFF_POOL_ISSUER"],
        json!({"Fn::Sub": "https://cognito-idp.${AWS::Region}.amazonaws.com/${StaffUserPool}"})
    );
    assert_eq!(env["STAFF_POOL_CLIENT_ID"], json!({"Ref": "StaffUserPoolClient"}));
    // The groups the code defaults to are the ones the pool has.
    let defaults = refund_chat::config::DeskConfig::from_lookup(|name| match name {
        "LEDGER_TABLE" | "CONVERSATION_TABLE" => Some("t".to_owned()),
        "PAYMENTS_BASE_URL" | "ORDERS_BASE_URL" => Some("https://x.internal".to_owned()),
        "STAFF_POOL_CLIENT_ID" => Some("client".to_owned()),
        _ => None,
    })
    .unwrap();
    assert_eq!(env["STAFF_GROUP"], defaults.staff_group.as_str());
    assert_eq!(env["APPROVER_GROUP"], defaults.approver_group.as_str());
    assert_eq!(
        resources["StaffGroup"]["Properties"]["GroupName"],
        defaults.staff_group.as_str()
    );
    assert_eq!(
        resources["ApproverGroup"]["Properties"]["GroupName"],
        defaults.approver_group.as_str()
    );
    for group in ["StaffGroup", "ApproverGroup"] {
        assert_eq!(
            resources[group]["Properties"]["UserPoolId"],
            json!({"Ref": "StaffUserPool"})
        );
    }
    let client = &resources["StaffUserPoolClient"]["Properties"];
    assert_eq!(client["GenerateSecret"], false, "a page cannot keep a secret");
    // The name on a decision is one only an administrator sets: unset,
    // WriteAttributes lets a person rename themselves.
    let writable = client["WriteAttributes"].as_array().expect("WriteAttributes set");
    assert!(!writable.is_empty(), "an empty list reads as unset");
    for attribute in [
        "name",
        "email",
        "email_verified",
        "preferred_username",
        "given_name",
        "family_name",
    ] {
        assert!(!writable.contains(&json!(attribute)), "a person may write {attribute}");
    }
    assert!(
        client["ExplicitAuthFlows"]
            .as_array()
            .unwrap()
            .contains(&json!("ALLOW_USER_PASSWORD_AUTH"))
    );
    // Contract 30 (the seventh review): a person taken out of a group loses
    // it within 15 minutes; both pools' clients give a code the same time.
    assert_eq!(
        (
            client["IdTokenValidity"].as_u64(),
            client["AccessTokenValidity"].as_u64()
        ),
        (Some(15), Some(15))
    );
    assert_eq!(client["TokenValidityUnits"]["IdToken"], "minutes");
    for pool_client in ["StaffUserPoolClient", "GuestUserPoolClient"] {
        assert_eq!(
            resources[pool_client]["Properties"]["AuthSessionValidity"],
            json!({"Ref": "SignInSessionMinutes"}),
            "{pool_client}"
        );
    }
    assert_eq!(template["Parameters"]["SignInSessionMinutes"]["Default"], 10);
    // A guest signs up without a password, giving the e-mail: the client
    // writes it and nothing else, a change counting once confirmed.
    let guests = &resources["GuestUserPoolClient"]["Properties"];
    assert_eq!(guests["WriteAttributes"], json!(["email"]));
    assert_eq!(
        resources["GuestUserPool"]["Properties"]["UserAttributeUpdateSettings"]["AttributesRequireVerificationBeforeUpdate"],
        json!(["email"])
    );
    assert_eq!(
        resources["StaffUserPool"]["Properties"]["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"], true,
        "nobody signs themselves up to the support team"
    );
    // Contract 30: a second factor, TOTP only, on unless the stack says
    // otherwise; refresh tokens for the page, revocable by "Sign out".
    let pool = &resources["StaffUserPool"]["Properties"];
    assert_eq!(pool["MfaConfiguration"], json!({"Ref": "StaffMfa"}));
    assert_eq!(pool["EnabledMfas"], json!(["SOFTWARE_TOKEN_MFA"]));
    let mfa = &template["Parameters"]["StaffMfa"];
    assert_eq!(mfa["Default"], "ON");
    assert_eq!(mfa["AllowedValues"], json!(["ON", "OPTIONAL"]), "never OFF");
    assert!(
        client["ExplicitAuthFlows"]
            .as_array()
            .unwrap()
            .contains(&json!("ALLOW_REFRESH_TOKEN_AUTH"))
    );
    assert_eq!(client["EnableTokenRevocation"], true);
    // A person's first sign-in chooses a password; the page states the pool's own rules.
    let policy = &resources["StaffUserPool"]["Properties"]["Policies"]["PasswordPolicy"];
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("web/staff/index.html")).unwrap();
    let page = page.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        page.contains(&format!("at least {} characters", policy["MinimumLength"])),
        "{policy}"
    );
    for (rule, words) in [
        ("RequireUppercase", "a capital letter"),
        ("RequireLowercase", "a small letter"),
        ("RequireNumbers", "a digit"),
        ("RequireSymbols", "a symbol"),
    ] {
        assert_eq!(
            policy[rule] == true,
            page.contains(words),
            "{rule}: the page says {words:?} only if the pool asks"
        );
    }

    // The staff pool's authorizer on every route but the page's files; the customers' on none.
    let auth = &resources["RefundChatApi"]["Properties"]["Auth"]["Authorizers"];
    assert_eq!(
        auth["StaffCognito"]["UserPoolArn"],
        json!({"Fn::GetAtt": ["StaffUserPool", "Arn"]})
    );
    let events = desk["Properties"]["Events"].as_object().unwrap();
    // The page's three files, and exactly the staff operations `docs/openapi.yaml` documents.
    let mut routed: Vec<(String, String)> = events
        .values()
        .map(|event| {
            let properties = &event["Properties"];
            (
                properties["Path"].as_str().unwrap().to_owned(),
                properties["Method"].as_str().unwrap().to_ascii_lowercase(),
            )
        })
        .filter(|(path, _)| {
            !["/support/staff/", "/support/staff/desk.js", "/support/staff/desk.css"].contains(&path.as_str())
        })
        .collect();
    routed.sort();
    let mut documented: Vec<(String, String)> = refund_chat_testkit::openapi()["paths"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(path, _)| path.starts_with(refund_chat::staff::http::PREFIX))
        .flat_map(|(path, operations)| {
            operations
                .as_object()
                .unwrap()
                .keys()
                .map(|method| (path.clone(), method.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    documented.sort();
    assert_eq!(
        routed, documented,
        "every documented staff operation routed, and no other"
    );
    assert_eq!(events.len(), documented.len() + 3);
    for (name, event) in events {
        let properties = &event["Properties"];
        let path = properties["Path"].as_str().unwrap();
        assert!(path.starts_with(refund_chat::staff::http::PREFIX), "{name}");
        assert_eq!(
            properties["RestApiId"],
            json!({"Ref": "RefundChatApi"}),
            "{name}: the same API and throttling"
        );
        assert_eq!(properties["ResponseTransferMode"], "RESPONSE_STREAM", "{name}");
        let page = ["/support/staff/", "/support/staff/desk.js", "/support/staff/desk.css"].contains(&path);
        assert_eq!(
            properties["Auth"]["Authorizer"],
            if page { "NONE" } else { "StaffCognito" },
            "{name}"
        );
    }

    // Its own role: the tables' items and indexes it reads, its logs, traces; no delete, no scan.
    assert_eq!(
        desk["Properties"]["Role"],
        json!({"Fn::GetAtt": ["RefundChatStaffRole", "Arn"]})
    );
    let role = serde_json::to_string(&resources["RefundChatStaffRole"]["Properties"]["Policies"]).unwrap();
    for absent in ["Delete", "Scan", "secretsmanager", "BatchWrite"] {
        assert!(!role.contains(absent), "the desk's role grants no {absent}");
    }
    assert_eq!(role.matches("\"*\"").count(), 1, "only X-Ray's segments on *");
    // Exactly what the staff code sends, table by table (as the customers' role).
    let statements = resources["RefundChatStaffRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        .as_array()
        .unwrap();
    let granted_on = |resource: Value| -> Vec<String> {
        let mut actions: Vec<String> = statements
            .iter()
            .filter(|statement| statement["Resource"] == resource)
            .flat_map(|statement| match &statement["Action"] {
                Value::String(action) => vec![action.clone()],
                list => list
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|a| a.as_str().map(str::to_owned))
                    .collect(),
            })
            .collect();
        actions.sort();
        actions
    };
    assert_eq!(
        granted_on(json!({"Fn::GetAtt": ["RefundLedger", "Arn"]})),
        refund_chat::staff::LEDGER_ACTIONS_USED
    );
    assert_eq!(
        granted_on(
            json!({"Fn::Sub": format!("${{RefundLedger.Arn}}/index/{}", refund_chat::staff::LEDGER_INDEX_QUERIED)})
        ),
        ["dynamodb:Query"]
    );
    assert_eq!(
        granted_on(json!({"Fn::GetAtt": ["ConversationTable", "Arn"]})),
        refund_chat::staff::CONVERSATION_ACTIONS_USED
    );
    for index in refund_chat::staff::CONVERSATION_INDEXES_QUERIED {
        assert_eq!(
            granted_on(json!({"Fn::Sub": format!("${{ConversationTable.Arn}}/index/{index}")})),
            ["dynamodb:Query"],
            "{index}"
        );
    }
    // A guest's e-mail for an approval's order read (contract 27): one action, on the guest pool alone.
    assert_eq!(
        granted_on(json!({"Fn::GetAtt": ["GuestUserPool", "Arn"]})),
        ["cognito-idp:AdminGetUser"]
    );
    let customers = serde_json::to_string(&resources["RefundChatFunctionRole"]).unwrap();
    assert!(
        !customers.contains("Staff") && !customers.contains("cognito"),
        "the customers' function gains nothing"
    );

    // The timeout chain: the desk's worst case < its timeout < the integration's.
    let lookup = |name: &str| match name {
        "PAYMENTS_BASE_URL" | "ORDERS_BASE_URL" => Some("https://x.internal".to_owned()),
        // The Event API's endpoints are its own attributes: known once deployed.
        "LIVE_EVENTS_URL" | "LIVE_REALTIME_URL" => None,
        // The reply times are the customers' function's: the desk takes the hours alone.
        "REPLY_TIME_MINUTES" | "REPLY_DUE_MINUTES" => None,
        // A parameter's value: its default.
        _ if env[name]["Ref"].is_string() => {
            let parameter = &template["Parameters"][env[name]["Ref"].as_str().unwrap()]["Default"];
            Some(parameter.as_str().map_or_else(|| parameter.to_string(), str::to_owned))
        }
        _ => env[name].as_str().map(str::to_owned).or(Some("t".to_owned())),
    };
    let config = refund_chat::config::StaffConfig::from_lookup(lookup).unwrap();
    let timeout = secs(&desk["Properties"]["Timeout"]);
    let worst = refund_chat::staff::worst_case(&config);
    assert_eq!(worst, Duration::from_millis(84_500));
    assert!(worst < timeout, "{worst:?} < {timeout:?}");
    let integration = template["Parameters"]["IntegrationTimeoutMillis"]["Default"]
        .as_u64()
        .unwrap();
    assert!(timeout < Duration::from_millis(integration));

    // The queue's oldest wait is measured by the sweep, alarmed on, and on the dashboard.
    let alarm = &resources["StaffQueueAgeAlarmResource"]["Properties"];
    assert_eq!(alarm["MetricName"], "StaffQueueOldestWait");
    assert_eq!(alarm["Threshold"], json!({"Ref": "StaffQueueAgeAlarm"}));
    assert_eq!(
        resources["RefundChatSweepFunction"]["Properties"]["Environment"]["Variables"]["CONVERSATION_TABLE"],
        json!({"Ref": "ConversationTable"})
    );
    let dashboard = resources["RefundChatDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
        .as_str()
        .unwrap();
    assert!(dashboard.contains("StaffDecisions") && dashboard.contains("StaffQueueOldestWait"));
}

/// The deploy review: CloudWatch takes at most 10 metrics in an alarm's
/// math, and an alarm that sums one series per reason (as `HandoffsAlarm`
/// did) breaks on the tenth reason. No alarm comes near: each reads at
/// most 4, a new reason or intent adds none (one series, as `HandoffsTotal`).
#[test]
fn no_alarm_reads_near_cloudwatchs_ten_metrics() {
    let template = template();
    let alarms: Vec<(&String, &Value)> = template["Resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, resource)| resource["Type"] == "AWS::CloudWatch::Alarm")
        .collect();
    assert!(alarms.len() >= 10, "the alarms are read: {}", alarms.len());
    for (name, alarm) in alarms {
        let read = alarm["Properties"]["Metrics"].as_array().map_or(1, |metrics| {
            metrics.iter().filter(|m| m.get("MetricStat").is_some()).count()
        });
        assert!(read <= 4, "{name} reads {read} metrics");
        assert!(
            !serde_json::to_string(&alarm["Properties"]["Metrics"])
                .unwrap()
                .contains("SEARCH("),
            "{name}: a SEARCH may return any number of series"
        );
    }
}

/// The deploy review: every function has alarms on its own `Errors`,
/// `Throttles` and `Duration` (the desk's had none), and docs/deploy.md
/// counts the alarms, functions, routes and parameters as the template has
/// them, and names every parameter.
#[test]
fn every_function_has_its_alarms_and_the_docs_count_what_the_template_has() {
    let template = template();
    let resources = template["Resources"].as_object().unwrap();
    let alarms: Vec<&Value> = resources
        .values()
        .filter(|resource| resource["Type"] == "AWS::CloudWatch::Alarm")
        .collect();
    let functions: Vec<(&String, &Value)> = resources
        .iter()
        .filter(|(_, resource)| resource["Type"] == "AWS::Serverless::Function")
        .collect();
    for (name, function) in &functions {
        for metric in ["Errors", "Throttles", "Duration"] {
            let alarm = alarms.iter().find(|alarm| {
                let properties = &alarm["Properties"];
                properties["Namespace"] == "AWS/Lambda"
                    && properties["MetricName"] == metric
                    && properties["Dimensions"][0]["Value"] == json!({ "Ref": name })
            });
            let Some(alarm) = alarm else {
                panic!("{name} has no {metric} alarm")
            };
            if metric == "Duration" {
                // Within 10% of the function's own timeout.
                let timeout = function["Properties"]["Timeout"].as_u64().unwrap();
                assert_eq!(alarm["Properties"]["Threshold"].as_u64(), Some(timeout * 900), "{name}");
            }
        }
    }
    let deploy = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/deploy.md")).unwrap();
    let count = alarms.len();
    for said in [format!("{count} CloudWatch alarms"), format!("{count} alarms (about")] {
        assert!(deploy.contains(&said), "docs/deploy.md does not say {said:?}");
    }
    // Its other counts, as the template has them.
    let routes: usize = functions
        .iter()
        .map(|(_, f)| {
            f["Properties"]["Events"]
                .as_object()
                .map_or(0, |events| events.values().filter(|e| e["Type"] == "Api").count())
        })
        .sum();
    let parameters = template["Parameters"].as_object().unwrap();
    for name in parameters.keys() {
        assert!(
            deploy.contains(&format!("`{name}`")),
            "docs/deploy.md does not name {name}"
        );
    }
    let parameters = parameters.len();
    for said in [
        format!("{} functions", functions.len()),
        format!("{routes} routes"),
        format!("{parameters} parameters"),
    ] {
        assert!(deploy.contains(&said), "docs/deploy.md does not say {said:?}");
    }
}

/// Contract 31: the Event API publishes by IAM alone and lets a connect or
/// a subscribe through only on the project's authorizer, whose answers are
/// not cached; the authorizer reads conversation headers and nothing else
/// (the staff's items denied), is invoked by this API alone, and takes the
/// tokens the routes take; the desk's role publishes on the two namespaces
/// and nothing else of AppSync.
#[test]
fn live_pokes_publish_by_iam_and_listen_by_the_projects_own_authorizer() {
    let template = template();
    let resources = &template["Resources"];
    let events = &resources["LiveEventApi"]["Properties"]["EventConfig"];
    assert_eq!(events["ConnectionAuthModes"], json!([{"AuthType": "AWS_LAMBDA"}]));
    assert_eq!(events["DefaultPublishAuthModes"], json!([{"AuthType": "AWS_IAM"}]));
    assert_eq!(events["DefaultSubscribeAuthModes"], json!([{"AuthType": "AWS_LAMBDA"}]));
    let lambda = events["AuthProviders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["AuthType"] == "AWS_LAMBDA")
        .unwrap();
    assert_eq!(lambda["LambdaAuthorizerConfig"]["AuthorizerResultTtlInSeconds"], 0);
    assert_eq!(
        lambda["LambdaAuthorizerConfig"]["AuthorizerUri"],
        json!({"Fn::GetAtt": ["RefundChatLiveFunction", "Arn"]})
    );
    for (namespace, name) in [
        ("LiveConversationsNamespace", refund_chat::push::CONVERSATIONS_NAMESPACE),
        ("LiveDeskNamespace", refund_chat::push::DESK_NAMESPACE),
    ] {
        let properties = &resources[namespace]["Properties"];
        assert_eq!(properties["Name"], name);
        assert_eq!(properties["PublishAuthModes"], json!([{"AuthType": "AWS_IAM"}]));
        assert_eq!(properties["SubscribeAuthModes"], json!([{"AuthType": "AWS_LAMBDA"}]));
    }
    let statements = resources["RefundChatLiveRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        .as_array()
        .unwrap();
    let allowed: Vec<(Value, Value)> = statements
        .iter()
        .filter(|s| s["Effect"] == "Allow")
        .map(|s| (s["Action"].clone(), s["Resource"].clone()))
        .collect();
    assert_eq!(
        allowed,
        [
            (
                json!("dynamodb:Query"),
                json!({"Fn::GetAtt": ["ConversationTable", "Arn"]})
            ),
            (
                json!(["logs:CreateLogStream", "logs:PutLogEvents"]),
                json!({"Fn::GetAtt": ["RefundChatLiveLogs", "Arn"]})
            ),
        ]
    );
    let denied = statements.iter().find(|s| s["Effect"] == "Deny").unwrap();
    assert_eq!(
        denied["Condition"]["ForAnyValue:StringLike"]["dynamodb:LeadingKeys"],
        json!(refund_chat::ledger::dynamo::schema::STAFF_ONLY_KEYS)
    );
    let permission = &resources["RefundChatLiveInvokedByAppSync"]["Properties"];
    assert_eq!(permission["Principal"], "appsync.amazonaws.com");
    assert_eq!(
        permission["SourceArn"],
        json!({"Fn::GetAtt": ["LiveEventApi", "ApiArn"]})
    );
    let env = &resources["RefundChatLiveFunction"]["Properties"]["Environment"]["Variables"];
    for name in [
        "CUSTOMER_POOL_ISSUER",
        "CUSTOMER_POOL_CLIENT_IDS",
        "GUEST_POOL_ISSUER",
        "GUEST_POOL_CLIENT_ID",
        "STAFF_POOL_ISSUER",
        "STAFF_POOL_CLIENT_ID",
    ] {
        assert!(!env[name].is_null(), "the authorizer takes the routes' tokens: {name}");
    }
    assert_eq!(env["STAFF_GROUP"], "support-staff");
    let desk = resources["RefundChatStaffRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s.to_string().contains("appsync"))
        .map(|s| (s["Action"].clone(), s["Resource"].clone()))
        .collect::<Vec<_>>();
    assert_eq!(
        desk,
        [(
            json!("appsync:EventPublish"),
            json!([
                {"Fn::GetAtt": ["LiveConversationsNamespace", "ChannelNamespaceArn"]},
                {"Fn::GetAtt": ["LiveDeskNamespace", "ChannelNamespaceArn"]}
            ])
        )]
    );
}
