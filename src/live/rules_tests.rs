//! The rules in the limits file: parse errors name the key; a reload changes weights and adds
//! rules, and refuses, naming the rule, what it may not change, all or nothing.

use super::*;

/// Two limits, a default rule and a login rule; `extra` is appended to the file.
fn file(login: &str, extra: &str) -> String {
    format!(
        r#"
[[admit.limit]]
name = "per client"
key = "claim"
rate = "100/h"
burst = 1000
cost = "weight"

[[admit.limit]]
name = "logins"
key = "claim"
rate = "50/h"
burst = 50

[[admit.limit]]
name = "failed logins"
key = "claim"
rate = "3/h"
burst = 3
outcome = true

[admit.default_rule]
limits = ["per client"]

[[admit.rule]]
{login}
{extra}
"#
    )
}

const LOGIN: &str = r#"method = "POST"
exact = "/login"
limits = ["per client", "logins"]
weight = 10"#;

fn key_of(document: &str) -> Option<String> {
    LimitsConfig::from_toml_str(document)
        .unwrap_err()
        .key()
        .map(str::to_owned)
}

#[test]
fn rules_are_read() {
    let config = LimitsConfig::from_toml_str(&file(
        LOGIN,
        "[[admit.rule]]\nroute = \"/users/{id}\"\nlimits = [\"per client\"]\n\
         weight = 5\nweight_header = \"X-Cost\"\nweight_min = 2\nweight_max = 50\n",
    ))
    .unwrap();
    let routes = config.routes.unwrap();
    assert_eq!(routes.default.weight, 1);
    assert_eq!(routes.default.path, RulePath::Default);
    let login = &routes.rules[0];
    assert_eq!(login.method.as_deref(), Some("POST"));
    assert_eq!(login.path, RulePath::Exact("/login".into()));
    assert_eq!(login.limits, ["per client", "logins"]);
    assert_eq!(login.weight, 10);
    let users = &routes.rules[1];
    assert_eq!(users.path, RulePath::Route("/users/{id}".into()));
    assert_eq!(
        users.weight_header,
        Some(WeightHeader {
            name: "x-cost".into(),
            min: 2,
            max: 50
        })
    );
    // A file without rules has none.
    assert_eq!(
        LimitsConfig::from_toml_str("[admit.bucket]\nburst = 1\nrate = \"1/s\"\n")
            .unwrap()
            .routes,
        None
    );
}

#[test]
fn each_bad_rule_is_refused_naming_its_key() {
    let rule = |body: &str| file(LOGIN, &format!("[[admit.rule]]\n{body}\n"));
    let limits = "limits = [\"per client\"]";
    let cases = [
        (rule(&format!("path = \"/x\"\n{limits}")), "admit.rule[1].path"),
        (rule(limits), "admit.rule[1]"),
        (
            rule(&format!("exact = \"/x\"\nprefix = \"/x\"\n{limits}")),
            "admit.rule[1]",
        ),
        (rule(&format!("exact = \"x\"\n{limits}")), "admit.rule[1].exact"),
        (
            rule(&format!("method = \"post\"\nexact = \"/x\"\n{limits}")),
            "admit.rule[1].method",
        ),
        (rule("exact = \"/x\""), "admit.rule[1].limits"),
        (
            rule("exact = \"/x\"\nlimits = [\"per clent\"]"),
            "admit.rule[1].limits",
        ),
        (
            rule("exact = \"/x\"\nlimits = [\"logins\", \"logins\"]"),
            "admit.rule[1].limits",
        ),
        (
            rule("exact = \"/x\"\nlimits = []"),
            "admit.rule[1].limits",
        ),
        (
            rule(&format!("exact = \"/x\"\n{limits}\nweight = -1")),
            "admit.rule[1].weight",
        ),
        (
            rule(&format!("exact = \"/x\"\n{limits}\nweight_max = 9")),
            "admit.rule[1].weight_max",
        ),
        (
            rule(&format!("exact = \"/x\"\n{limits}\nweight_header = \"x-cost\"")),
            "admit.rule[1].weight_max",
        ),
        (
            rule(&format!(
                "exact = \"/x\"\n{limits}\nweight_header = \"x cost\"\nweight_max = 9"
            )),
            "admit.rule[1].weight_header",
        ),
        (
            rule(&format!(
                "exact = \"/x\"\n{limits}\nweight_header = \"x-cost\"\nweight_min = 0\nweight_max = 9"
            )),
            "admit.rule[1].weight_min",
        ),
        (
            rule(&format!(
                "exact = \"/x\"\n{limits}\nweight_header = \"x-cost\"\nweight_min = 9\nweight_max = 5"
            )),
            "admit.rule[1].weight_max",
        ),
        (
            rule(&format!(
                "exact = \"/x\"\n{limits}\nweight = 20\nweight_header = \"x-cost\"\nweight_max = 9"
            )),
            "admit.rule[1].weight",
        ),
        (
            file(LOGIN, "").replace("[admit.default_rule]\nlimits = [\"per client\"]", ""),
            "admit.default_rule",
        ),
        (
            file(LOGIN, "").replace(
                "[admit.default_rule]\n",
                "[admit.default_rule]\nmethod = \"GET\"\n",
            ),
            "admit.default_rule.method",
        ),
        (
            file(LOGIN, "").replace("limits = [\"per client\"]\n\n[[", "\n[["),
            "admit.default_rule.limits",
        ),
    ];
    for (document, key) in cases {
        assert_eq!(key_of(&document).as_deref(), Some(key), "{document}");
    }
    let too_many = (0..MAX_RULES)
        .map(|i| format!("[[admit.rule]]\nexact = \"/{i}\"\n{limits}\n"))
        .collect::<String>();
    assert_eq!(
        key_of(&file(LOGIN, &too_many)).as_deref(),
        Some("admit.rule[64]")
    );
}

#[test]
fn a_file_without_rules_reloads_rules_neither_in_nor_out() {
    let live = LiveLimits::from_toml_str(&file(LOGIN, "")).unwrap();
    let no_rules = file(LOGIN, "")
        .replace("[admit.default_rule]\nlimits = [\"per client\"]", "")
        .replace(&format!("[[admit.rule]]\n{LOGIN}"), "");
    let err = live.reload_str(&no_rules).unwrap_err();
    assert_eq!(err.key(), Some("admit.default_rule"));
    let live = LiveLimits::from_toml_str(&no_rules).unwrap();
    let err = live.reload_str(&file(LOGIN, "")).unwrap_err();
    assert_eq!(err.key(), Some("admit.default_rule"));
}

#[cfg(feature = "tower")]
mod layer {
    use super::*;
    use crate::gate::Gate;
    use crate::tower::{AdmitLayer, ClientIp, HeaderKey, MeteredBody};
    use crate::Clock;
    use crate::ManualClock;
    use http::{HeaderName, Method, Request, Response, StatusCode};
    use std::convert::Infallible;
    use std::net::SocketAddr;
    use tower::{Layer, ServiceExt};

    type App = crate::tower::Admit<
        tower::util::ServiceFn<
            fn(Request<MeteredBody<()>>) -> std::future::Ready<Result<Response<()>, Infallible>>,
        >,
        HeaderKey,
        ManualClock,
    >;

    fn ok(_: Request<MeteredBody<()>>) -> std::future::Ready<Result<Response<()>, Infallible>> {
        std::future::ready(Ok(Response::new(())))
    }

    struct Setup {
        live: LiveLimits<ManualClock>,
        app: App,
    }

    fn setup(document: &str, trust: Option<&ClientIp>) -> Setup {
        let config = LimitsConfig::from_toml_str(document).unwrap();
        let live = LiveLimits::from_config_with_clock(&config, ManualClock::new()).unwrap();
        let routes = match trust {
            None => live.routes().unwrap(),
            Some(trust) => live.routes_trusting(trust).unwrap(),
        };
        let layer = AdmitLayer::builder(HeaderKey::new(HeaderName::from_static("x-client")))
            .routes(routes)
            .build()
            .unwrap();
        let app = layer.layer(tower::service_fn(
            ok as fn(_) -> std::future::Ready<Result<Response<()>, Infallible>>,
        ));
        Setup { live, app }
    }

    impl Setup {
        /// Sends `method path` as client `c`, from `peer`; the status.
        fn send_from(
            &mut self,
            method: Method,
            path: &str,
            headers: &[(&str, &str)],
            peer: [u8; 4],
        ) -> StatusCode {
            let mut request = Request::builder()
                .method(method)
                .uri(path)
                .header("x-client", "c");
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            let mut request = request.body(()).unwrap();
            request
                .extensions_mut()
                .insert(SocketAddr::from((peer, 4_711)));
            let app = self.app.clone();
            let response = futures_block_on(app.oneshot(request)).unwrap();
            response.status()
        }

        fn send(&mut self, method: Method, path: &str) -> StatusCode {
            self.send_from(method, path, &[], [192, 0, 2, 9])
        }

        /// Tokens of "per client" the client has spent.
        fn spent(&self) -> u32 {
            let gate: Gate<ManualClock> = self.live.gate().unwrap();
            let (limiter, _) = gate.limiter().unwrap();
            let now = limiter.clock().now_ns();
            1_000
                - limiter
                    .peek_at("c".as_bytes(), 0, 1, now)
                    .unwrap()
                    .available()
        }

        /// Sends `method path` and returns what it cost "per client".
        fn cost(&mut self, method: Method, path: &str) -> u32 {
            let before = self.spent();
            assert_eq!(self.send(method, path), StatusCode::OK, "{path}");
            self.spent() - before
        }
    }

    fn futures_block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn a_reload_changes_a_rule_s_weight_in_place() {
        let mut s = setup(&file(LOGIN, ""), None);
        assert_eq!(s.cost(Method::POST, "/login"), 10);
        assert_eq!(s.cost(Method::GET, "/"), 1, "the default rule");
        let reloaded = s
            .live
            .reload_str(&file(&LOGIN.replace("weight = 10", "weight = 20"), ""))
            .unwrap();
        assert_eq!(reloaded.changed(), ["admit.rule[0].weight"]);
        assert_eq!(s.cost(Method::POST, "/login"), 20);
        let reloaded = s
            .live
            .reload_str(
                &file(&LOGIN.replace("weight = 10", "weight = 20"), "").replace(
                    "[admit.default_rule]\n",
                    "[admit.default_rule]\nweight = 3\n",
                ),
            )
            .unwrap();
        assert_eq!(reloaded.changed(), ["admit.default_rule.weight"]);
        assert_eq!(s.cost(Method::GET, "/"), 3);
    }

    #[test]
    fn a_limit_s_cost_reloaded_reaches_every_rule_charging_it() {
        let mut s = setup(&file(LOGIN, ""), None);
        assert_eq!(s.cost(Method::GET, "/"), 1);
        let raised =
            file(LOGIN, "").replacen("cost = \"weight\"", "cost = \"weight\"\nmin = 15", 1);
        let reloaded = s.live.reload_str(&raised).unwrap();
        assert_eq!(reloaded.changed(), ["admit.limit[0].cost"]);
        assert_eq!(s.cost(Method::GET, "/"), 15, "the default rule's copy");
        assert_eq!(s.cost(Method::POST, "/login"), 15, "the login rule's copy");
    }

    #[test]
    fn a_rule_added_by_a_reload_takes_effect_after_the_running_ones() {
        let mut s = setup(&file(LOGIN, ""), None);
        assert_eq!(s.cost(Method::GET, "/reports/q3"), 1, "the default rule");
        let reports =
            "[[admit.rule]]\nprefix = \"/reports\"\nlimits = [\"per client\"]\nweight = 50\n";
        let reloaded = s.live.reload_str(&file(LOGIN, reports)).unwrap();
        assert_eq!(reloaded.changed(), ["admit.rule[1]"]);
        assert_eq!(s.cost(Method::GET, "/reports/q3"), 50);
        assert_eq!(s.cost(Method::POST, "/login"), 10, "the running rule first");
        // The same file again changes nothing; its weight is then reloadable like any.
        assert!(s
            .live
            .reload_str(&file(LOGIN, reports))
            .unwrap()
            .changed()
            .is_empty());
        let reloaded = s
            .live
            .reload_str(&file(LOGIN, &reports.replace("50", "60")))
            .unwrap();
        assert_eq!(reloaded.changed(), ["admit.rule[1].weight"]);
        assert_eq!(s.cost(Method::GET, "/reports/q3"), 60);
        // A second layer built from the handle shares the rules.
        let routes = s.live.routes().unwrap();
        assert!(format!("{routes:?}").contains("/reports"));
    }

    #[test]
    fn a_reload_refuses_what_it_may_not_change_naming_the_rule_and_changes_nothing() {
        let mut s = setup(&file(LOGIN, ""), None);
        // Each refused file also changes the login weight and a rate: neither may land.
        let also = |document: String| {
            document
                .replace("weight = 10", "weight = 30")
                .replace("rate = \"100/h\"", "rate = \"200/h\"")
        };
        let no_login = file("", "").replace("[[admit.rule]]\n", "");
        let outcome = "[[admit.rule]]\nexact = \"/x\"\nlimits = [\"failed logins\"]\n";
        let header = "[[admit.rule]]\nexact = \"/x\"\nlimits = [\"per client\"]\n\
                      weight_header = \"x-cost\"\nweight_max = 9\n";
        let cases = [
            (no_login, "admit.rule[0]"),
            (file(&LOGIN.replace("POST", "PUT"), ""), "admit.rule[0]"),
            (
                file(&LOGIN.replace("/login", "/signin"), ""),
                "admit.rule[0]",
            ),
            (file(&LOGIN.replace("exact", "prefix"), ""), "admit.rule[0]"),
            (
                file(&LOGIN.replace(", \"logins\"", ""), ""),
                "admit.rule[0].limits",
            ),
            (
                file(LOGIN, "").replacen(
                    "limits = [\"per client\"]",
                    "limits = [\"per client\", \"logins\"]",
                    1,
                ),
                "admit.default_rule.limits",
            ),
            (
                file(
                    "exact = \"/x\"\nlimits = [\"per client\"]",
                    &format!("[[admit.rule]]\n{LOGIN}"),
                ),
                "admit.rule[0]",
            ),
            (file(LOGIN, outcome), "admit.rule[1].limits"),
            (file(LOGIN, header), "admit.rule[1].weight_header"),
        ];
        for (document, key) in cases {
            let err = s.live.reload_str(&also(document.clone())).unwrap_err();
            assert_eq!(err.key(), Some(key), "{document}\n{err}");
            assert!(
                matches!(
                    err,
                    LimitsConfigError::Key {
                        problem: KeyProblem::RuleFixed { .. }
                            | KeyProblem::RuleNeedsLayer { .. }
                            | KeyProblem::NoTrustedProxies,
                        ..
                    }
                ),
                "{err}"
            );
            assert_eq!(s.cost(Method::POST, "/login"), 10, "{key}: nothing changed");
            let limiter = s.live.limiter().unwrap();
            assert_eq!(
                limiter.config(0),
                Some(
                    crate::BucketConfig::per(100, std::time::Duration::from_secs(3_600))
                        .unwrap()
                        .with_burst(1_000)
                        .unwrap()
                ),
                "{key}: the rate is unchanged"
            );
        }
        // Fixed, the same changes apply.
        assert_eq!(
            s.live.reload_str(&also(file(LOGIN, ""))).unwrap().changed(),
            ["admit.limit[0]", "admit.rule[0].weight"]
        );
    }

    #[test]
    fn a_header_weight_from_the_file_counts_from_a_trusted_proxy_only() {
        let rule = "method = \"POST\"\nexact = \"/complete\"\nlimits = [\"per client\"]\n\
                    weight = 100\nweight_header = \"x-cost\"\nweight_min = 10\nweight_max = 400";
        let trust = ClientIp::x_forwarded_for().trust("10.0.0.0/8").unwrap();
        let err = LiveLimits::from_toml_str(&file(rule, ""))
            .unwrap()
            .routes()
            .unwrap_err();
        assert_eq!(err.key(), Some("admit.rule[0].weight_header"));
        let mut s = setup(&file(rule, ""), Some(&trust));
        let mut cost = |cost: &str, peer| {
            let before = s.spent();
            let status = s.send_from(Method::POST, "/complete", &[("x-cost", cost)], peer);
            assert_eq!(status, StatusCode::OK);
            s.spent() - before
        };
        assert_eq!(cost("250", [10, 0, 0, 1]), 250);
        assert_eq!(cost("0", [10, 0, 0, 1]), 10);
        assert_eq!(cost("100000000000", [10, 0, 0, 1]), 400);
        assert_eq!(cost("1", [192, 0, 2, 9]), 100, "a client's own claim");
        assert_eq!(cost("x", [10, 0, 0, 1]), 100, "malformed");
    }
}
