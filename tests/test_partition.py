from collections import Counter

from crawler.partition import owner

HOSTS = [f"host{i}.example" for i in range(3000)]


def test_every_member_computes_the_same_owner_whatever_the_order():
    members = ["a-1", "b-2", "c-3"]
    for host in HOSTS[:200]:
        assert owner(host, members) == owner(host, reversed(members)) in members


def test_no_members_no_owner():
    assert owner("example.com", []) is None


def test_hosts_are_spread_evenly():
    counts = Counter(owner(host, ["a", "b", "c"]) for host in HOSTS)
    assert all(800 < n < 1200 for n in counts.values()), counts


def test_a_member_leaving_moves_only_its_own_hosts():
    before = {host: owner(host, ["a", "b", "c"]) for host in HOSTS}
    after = {host: owner(host, ["a", "c"]) for host in HOSTS}
    moved = [host for host in HOSTS if before[host] != after[host]]
    assert moved and all(before[host] == "b" for host in moved)


def test_a_member_joining_takes_about_its_share_and_nothing_moves_between_others():
    before = {host: owner(host, ["a", "b"]) for host in HOSTS}
    after = {host: owner(host, ["a", "b", "c"]) for host in HOSTS}
    moved = [host for host in HOSTS if before[host] != after[host]]
    assert all(after[host] == "c" for host in moved)
    assert 800 < len(moved) < 1200
