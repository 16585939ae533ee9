use super::*;

fn labelled(intents: &[Intent], risk: Risk, confidence: f64) -> Routing {
    Routing::Labelled(Labels {
        intents: intents.to_vec(),
        risk,
        confidence,
    })
}

#[test]
fn answers_inside_the_schema_are_read_and_the_rest_refused() {
    let labels = parse(r#"{"intents":["order_status","refund"],"risk":"low","confidence":0.92}"#).unwrap();
    assert_eq!(labels.intents, [Intent::OrderStatus, Intent::Refund]);
    assert_eq!(labels.risk, Risk::Low);
    for outside in [
        r#"{"intents":[],"risk":"low","confidence":0.9}"#,
        r#"{"intents":["refund","refund"],"risk":"low","confidence":0.9}"#,
        r#"{"intents":["refund","return","other","order_status"],"risk":"low","confidence":0.9}"#,
        r#"{"intents":["refund_everything"],"risk":"low","confidence":0.9}"#,
        r#"{"intents":["refund"],"risk":"none","confidence":0.9}"#,
        r#"{"intents":["refund"],"risk":"low","confidence":1.5}"#,
        r#"{"intents":["refund"],"risk":"low","confidence":"high"}"#,
        r#"{"intents":["refund"],"risk":"low","confidence":0.9,"approve":true}"#,
        r#"["refund"]"#,
        "refund, low, 0.9",
    ] {
        assert!(parse(outside).is_err(), "{outside}");
    }
}

#[test]
fn risk_goes_to_a_person_whatever_the_confidence_then_unserved_intents() {
    let served = Served::default();
    assert_eq!(
        decide(&labelled(&[Intent::Refund], Risk::High, 1.0), &served, 0.7),
        Route::HandOff(Reason::Risk)
    );
    assert_eq!(
        decide(
            &labelled(&[Intent::Refund, Intent::AddressChange], Risk::Low, 0.2),
            &served,
            0.7
        ),
        Route::HandOff(Reason::IntentNotServed)
    );
    assert_eq!(
        decide(&labelled(&[Intent::Refund], Risk::Low, 0.95), &served, 0.7),
        Route::Agent { unsure: false }
    );
}

#[test]
fn an_unsure_or_failed_router_runs_the_agent_tightened_never_refuses() {
    let served = Served::default();
    assert_eq!(
        decide(&labelled(&[Intent::Refund], Risk::Low, 0.69), &served, 0.7),
        Route::Agent { unsure: true }
    );
    assert_eq!(
        decide(&Routing::Failed("timeout"), &served, 0.7),
        Route::Agent { unsure: true }
    );
    assert_eq!(Routing::Failed("timeout").recorded(), "unknown");
    assert_eq!(
        labelled(&[Intent::OrderStatus, Intent::Refund], Risk::Low, 0.915).recorded(),
        "order_status,refund;low;0.915"
    );
    // Never rounded into the other side of the threshold.
    assert_eq!(
        labelled(&[Intent::Refund], Risk::Low, 0.6999).recorded(),
        "refund;low;0.6999"
    );
}

#[test]
fn a_refund_is_routed_only_by_labels_naming_it_while_refunds_are_served() {
    let served = Served::default();
    let not_served = Served::parse("order_status,policy_question,other").unwrap();
    let refund = labelled(&[Intent::OrderStatus, Intent::Refund], Risk::Low, 0.9);
    let order_only = labelled(&[Intent::OrderStatus], Risk::Low, 0.9);
    assert!(!refund_not_routed(&refund, &served));
    assert!(refund_not_routed(&order_only, &served));
    assert!(refund_not_routed(&refund, &not_served));
    assert!(refund_not_routed(&Routing::Failed("timeout"), &not_served));
    // A failed router's refunds wait as an unsure one's, for that reason alone.
    assert!(!refund_not_routed(&Routing::Failed("timeout"), &served));
}

#[test]
fn agent_intents_are_known_names_at_least_one() {
    let served = Served::parse("refund, order_status").unwrap();
    assert!(served.contains(Intent::Refund) && !served.contains(Intent::Other));
    assert!(Served::parse("").is_err());
    assert!(Served::parse("refund,refunds").is_err());
}

#[test]
fn recorded_labels_read_back_as_they_were_and_anything_else_is_unknown() {
    for routing in [
        labelled(&[Intent::OrderStatus, Intent::Refund], Risk::Low, 0.92),
        labelled(&[Intent::AddressChange], Risk::High, 1.0),
    ] {
        assert_eq!(Routing::from_recorded(&routing.recorded()), routing);
    }
    for other in [
        "unknown",
        "",
        "refund;low",
        "refund;low;0.9;x",
        "refunds;low;0.9",
        "refund;medium;0.9",
        ";low;0.9",
    ] {
        assert!(matches!(Routing::from_recorded(other), Routing::Failed(_)), "{other:?}");
    }
}
