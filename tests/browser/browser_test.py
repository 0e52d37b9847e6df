#!/usr/bin/env python3
"""Browser test of the click-to-segment page: headless Chromium driven by Selenium.

Starts `vitrt serve` (tiny fixture model) on a free loopback port, opens the page, loads an image
through the file input, clicks a point on the canvas, and checks that a mask overlay appears; then a
second click (a background point) must change the overlay, and "Segment everything" must answer.
Exit 0 on success, 1 on failure.
A screenshot of the final page is written to <out>/browser_test.png.
"""
import argparse
import os
import re
import subprocess
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

# Counts the overlay's painted pixels and a checksum of them, in the page.
OVERLAY_JS = """
const c = document.getElementById('overlay');
const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
let n = 0, h = 0;
for (let i = 3; i < d.length; i += 4) if (d[i]) { n++; h = (h * 31 + i) % 1000000007; }
return [n, h, c.dataset.maskVersion, c.dataset.maskArea];
"""


def start_server(args):
    model = os.path.join(args.fixtures, "sam", "tiny1024.pth")
    config = os.path.join(args.fixtures, "sam", "tiny1024.json")
    proc = subprocess.Popen([args.vitrt, "serve", "--checkpoint", model, "--config", config, "--host", "127.0.0.1",
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    lines = []
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+/)", line)
        if m:
            return proc, m.group(1)
    proc.kill()
    raise RuntimeError("vitrt serve did not start:\n" + "".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vitrt", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--chromedriver", required=True)
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    server, url = start_server(args)
    opts = webdriver.ChromeOptions()
    opts.binary_location = args.chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(executable_path=args.chromedriver), options=opts)
    ok = False
    try:
        driver.get(url)
        wait = WebDriverWait(driver, 60)
        image = os.path.abspath(os.path.join(args.fixtures, "sam", "images", "landscape.png"))
        driver.find_element(By.ID, "file").send_keys(image)
        wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "ready")
        print("embedding ready:", driver.find_element(By.ID, "status").text)

        canvas = driver.find_element(By.ID, "prompts")
        w, h = canvas.size["width"], canvas.size["height"]
        before = driver.execute_script(OVERLAY_JS)
        assert before[0] == 0, f"overlay painted before any click: {before}"

        # First click: an object point left of the centre (offsets are from the element's centre).
        ActionChains(driver).move_to_element_with_offset(canvas, -w // 6, h // 10).click().perform()
        wait.until(lambda d: d.execute_script(OVERLAY_JS)[2] == "1")
        first = driver.execute_script(OVERLAY_JS)
        print(f"after click 1: {first[0]} overlay pixels, mask area {first[3]}")
        assert first[0] > 0, "no mask overlay appeared after the first click"
        assert int(first[3]) == first[0], f"overlay pixels {first[0]} != reported mask area {first[3]}"

        # Second click: a background point (right click) elsewhere; the mask must change.
        ActionChains(driver).move_to_element_with_offset(canvas, w // 5, -h // 8).context_click().perform()
        wait.until(lambda d: d.execute_script(OVERLAY_JS)[2] == "2")
        second = driver.execute_script(OVERLAY_JS)
        print(f"after click 2: {second[0]} overlay pixels, mask area {second[3]}")
        assert (second[0], second[1]) != (first[0], first[1]), "the second click did not change the overlay"

        # "Segment everything" (when the build has it) adds its masks to the overlay.
        health = driver.execute_script("return (await fetch('/v1/health')).json();")
        if health.get("everything"):
            driver.find_element(By.ID, "everything").click()
            WebDriverWait(driver, 120).until(
                lambda d: "segment everything" in d.find_element(By.ID, "status").text and
                d.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "ready")
            print("segment everything:", driver.find_element(By.ID, "status").text)
            assert "failed" not in driver.find_element(By.ID, "status").text
        ok = True
    except Exception as e:  # report, keep the screenshot, fail
        print(f"FAILED: {type(e).__name__}: {e}")
        try:
            print("page status:", driver.find_element(By.ID, "status").text)
            for entry in driver.get_log("browser"):
                print("console:", entry)
        except Exception:
            pass
    finally:
        try:
            driver.save_screenshot(os.path.join(args.out, "browser_test.png"))
        except Exception:
            pass
        driver.quit()
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    print("PASSED" if ok else "browser test failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
